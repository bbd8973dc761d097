package mmlspark.pixels

import java.io.IOException
import java.nio.file.{
  AccessDeniedException,
  Files,
  NoSuchFileException,
  NotDirectoryException,
  Paths
}

import org.apache.hadoop.fs.Path
import org.apache.hadoop.io.IOUtils
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.SparkSession
import org.apache.spark.util.SerializableConfiguration

/** Reading image files on the executors, from local paths and any filesystem Hadoop reads. */
object ImageFiles {

  /** The session's Hadoop configuration, for the tasks that read files. */
  def hadoopConf(spark: SparkSession): Broadcast[SerializableConfiguration] =
    spark.sparkContext.broadcast(new SerializableConfiguration(spark.sessionState.newHadoopConf()))

  /** The bytes of one file, refused (before reading) when over `maxBytes`. */
  def readBytes(path: String, conf: SerializableConfiguration, maxBytes: Long): Array[Byte] = {
    val hadoopPath = new Path(path)
    val fs = hadoopPath.getFileSystem(conf.value)
    def tooLarge(length: Long) = new UndecodableImageException(
      RowMessages.FileOverLimit(
        "size" -> length,
        "limit" -> maxBytes,
        "key" -> ImageLimits.MaxFileBytesKey
      )
    )
    try {
      if (fs.getScheme == "file") {
        val file = Paths.get(hadoopPath.toUri)
        val length = Files.size(file)
        if (length > maxBytes) throw tooLarge(length)
        Files.readAllBytes(file)
      } else {
        val length = fs.getFileStatus(hadoopPath).getLen
        if (length > maxBytes) throw tooLarge(length)
        val bytes = new Array[Byte](Math.toIntExact(length))
        val in = fs.open(hadoopPath)
        try IOUtils.readFully(in, bytes, 0, bytes.length)
        finally in.close()
        bytes
      }
    } catch {
      case e: IOException =>
        throw new UndecodableImageException(s"cannot read the file: ${reason(e)}")
    }
  }

  /** Why an IO operation failed, in words (java.nio's exceptions carry only the path). */
  def reason(e: Throwable): String = e match {
    case _: AccessDeniedException => "permission denied"
    case _: NoSuchFileException => "no such file (removed while reading?)"
    case _: NotDirectoryException => "not a folder"
    case other if other.getMessage != null => other.getMessage
    case other => other.getClass.getSimpleName
  }

}
