package mmlspark.onnx

import java.io.File
import java.nio.file.{Files, StandardCopyOption}
import java.util.concurrent.ConcurrentHashMap

import org.apache.hadoop.fs.Path
import org.apache.spark.SparkFiles
import org.apache.spark.util.SerializableConfiguration

/** Where an executor finds the model: always a file on local disk in the end, so that ONNX Runtime
  * reads it natively and the JVM heap of an executor never holds the model bytes.
  */
sealed trait ModelSource extends Serializable {

  /** SHA-256 of the model bytes: sessions are shared by content, not by path. */
  def hash: String

  /** A local file with the model, made available once per JVM. */
  def localFile(): String
}

/** Model bytes the driver shipped with `SparkContext.addFile`, once per executor. */
final case class ShippedModel(hash: String, fileName: String) extends ModelSource {
  def localFile(): String = SparkFiles.get(fileName)
}

/** A model at a Hadoop filesystem path, with the external data files it names (relative to its
  * directory), copied to local disk once per executor JVM (local paths are used in place).
  */
final case class HadoopModel(
    hash: String,
    path: String,
    externalData: Seq[String],
    conf: SerializableConfiguration
) extends ModelSource {
  def localFile(): String = HadoopModel.localCopy(this)
}

object HadoopModel {
  private val copies = new ConcurrentHashMap[String, String]()

  // Copies of remote models by content: equal content, interchangeable copies.
  def localCopy(model: HadoopModel): String = {
    val source = new Path(model.path)
    val fs = source.getFileSystem(model.conf.value)
    if (fs.getScheme == "file") new File(fs.makeQualified(source).toUri).getPath
    else
      copies.computeIfAbsent(
        model.hash,
        _ => copyToLocal(fs, source, model.externalData, s"${model.hash}.onnx")
      )
  }

  /** Copies the model at `source` to a new local temporary directory as `name`, with the external
    * data files `externalData` beside it as ONNX Runtime expects them; returns the model's path.
    */
  def copyToLocal(
      fs: org.apache.hadoop.fs.FileSystem,
      source: Path,
      externalData: Seq[String],
      name: String
  ): String = {
    val dir = TempFiles.createDir("mmlspark-onnx").toPath
    def copy(from: Path, to: java.nio.file.Path): Unit = {
      Files.createDirectories(to.getParent)
      val in = fs.open(from)
      try Files.copy(in, to, StandardCopyOption.REPLACE_EXISTING)
      finally in.close()
    }
    copy(source, dir.resolve(name))
    externalData.foreach(l => copy(new Path(source.getParent, l), dir.resolve(l)))
    dir.resolve(name).toString
  }
}

/** Temporary directories of this JVM (model copies, payload files), deleted with their contents
  * when the JVM exits.
  */
object TempFiles {
  private val dirs = ConcurrentHashMap.newKeySet[File]()

  private lazy val cleanup: Unit = Runtime.getRuntime.addShutdownHook(
    new Thread(() => dirs.forEach(d => deleteRecursively(d)), "mmlspark-onnx-temp-cleanup")
  )

  def createDir(prefix: String): File = {
    cleanup
    val dir = Files.createTempDirectory(prefix).toFile
    dirs.add(dir)
    dir
  }

  def deleteRecursively(file: File): Unit = {
    if (file.isDirectory && !Files.isSymbolicLink(file.toPath))
      Option(file.listFiles()).foreach(_.foreach(deleteRecursively))
    file.delete()
  }
}
