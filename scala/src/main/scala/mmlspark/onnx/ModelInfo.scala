package mmlspark.onnx

import java.io.{File, InputStream}
import java.nio.file.Files
import java.security.{DigestInputStream, MessageDigest}
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import ai.onnxruntime.{OrtException, OrtSession}
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession

/** What the driver knows of a model: where executors get it, and its inputs and outputs (read once
  * through a short-lived CPU session, which also proves the file is a model ONNX Runtime can load).
  */
final case class ModelInfo(source: ModelSource, inputs: Seq[TensorSpec], outputs: Seq[TensorSpec]) {

  /** Ships payload models to the executors of `spark` (once per application and model). */
  def ship(spark: SparkSession): Unit = source match {
    case ShippedModel(hash, fileName) =>
      val sc = spark.sparkContext
      if (!sc.listFiles().exists(_.endsWith("/" + fileName)))
        sc.addFile(ModelInfo.payloadFile(hash).getPath)
    case _: HadoopModel =>
  }
}

object ModelInfo {

  private val payloadFiles = new ConcurrentHashMap[String, File]()
  private val byLocation = new ConcurrentHashMap[(String, Long, Long), ModelInfo]()

  def sha256(in: InputStream): String = {
    val digest = MessageDigest.getInstance("SHA-256")
    val stream = new DigestInputStream(in, digest)
    try {
      val buffer = new Array[Byte](1 << 20)
      while (stream.read(buffer) >= 0) {}
    } finally stream.close()
    digest.digest().map(b => f"$b%02x").mkString
  }

  /** The driver's local copy of payload bytes, named by their hash (what `addFile` ships). */
  private def payloadFile(hash: String): File = payloadFiles.get(hash)

  def ofPayload(bytes: Array[Byte], what: String): ModelInfo = {
    val hash = sha256(new java.io.ByteArrayInputStream(bytes))
    val file = payloadFiles.computeIfAbsent(
      hash,
      _ => {
        val dir = Files.createTempDirectory("mmlspark-onnx").toFile
        val f = new File(dir, s"mmlspark-onnx-$hash.onnx")
        Files.write(f.toPath, bytes)
        f.deleteOnExit()
        dir.deleteOnExit()
        f
      }
    )
    inspect(ShippedModel(hash, file.getName), file.getPath, what)
  }

  /** The model at a Hadoop filesystem `location`, cached by path, size and modification time. */
  def ofLocation(location: String, spark: SparkSession, what: String): ModelInfo = {
    val conf = spark.sparkContext.hadoopConfiguration
    val path = new Path(location)
    val status =
      try path.getFileSystem(conf).getFileStatus(path)
      catch {
        case NonFatal(e) =>
          throw new IllegalArgumentException(s"$what: cannot read the model at '$location': $e", e)
      }
    byLocation.computeIfAbsent(
      (status.getPath.toString, status.getLen, status.getModificationTime),
      _ => {
        val hash = sha256(path.getFileSystem(conf).open(path))
        val source = HadoopModel(hash, status.getPath.toString, new HadoopConf(conf))
        inspect(source, source.localFile(), what)
      }
    )
  }

  private def inspect(source: ModelSource, localFile: String, what: String): ModelInfo = {
    val options = new OrtSession.SessionOptions()
    try {
      options.setIntraOpNumThreads(1)
      options.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.NO_OPT)
      val session = OrtSessions.environment.createSession(localFile, options)
      try
        ModelInfo(
          source,
          session.getInputInfo.asScala.toSeq.map { case (n, i) => TensorSpec.of(n, i) },
          session.getOutputInfo.asScala.toSeq.map { case (n, i) => TensorSpec.of(n, i) }
        )
      finally session.close()
    } catch {
      case e: OrtException =>
        throw new IllegalArgumentException(
          s"$what is not a model ONNX Runtime ${ai.onnxruntime.OrtEnvironment.getEnvironment.getVersion} " +
            s"can load: ${e.getMessage}",
          e
        )
    } finally options.close()
  }
}
