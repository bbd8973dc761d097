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
import org.apache.spark.util.SerializableConfiguration

/** What the driver knows of a model: where executors get it, and its inputs and outputs (read once
  * through a short-lived CPU session, which also proves the file is a model ONNX Runtime can load).
  */
final case class ModelInfo(source: ModelSource, inputs: Seq[TensorSpec], outputs: Seq[TensorSpec]) {

  /** The external data files of the model (relative to its directory). */
  def externalData: Seq[String] = source match {
    case h: HadoopModel => h.externalData
    case _ => Nil
  }

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
  // By (path, size, modification time): the model and the status of its external data files.
  private val byLocation = new ConcurrentHashMap[(String, Long, Long), (ModelInfo, Seq[Any])]()

  // By the SHA-256 of the bytes: what inspecting a payload found. Inspecting opens an ONNX Runtime
  // session (about 1 s for ResNet-50 cut at its pooled features); a model's inputs, outputs and
  // loadability are those of its bytes, so each content is inspected once per JVM, whatever the
  // stages that carry it.
  private val byContent = new ConcurrentHashMap[String, ModelInfo]()
  private val inspected = new java.util.concurrent.atomic.AtomicLong()

  /** Models this JVM has opened in ONNX Runtime to read their inputs and outputs. */
  def inspections: Long = inspected.get()

  def sha256(in: InputStream): String = sha256(Seq(() => in))

  def sha256(bytes: Array[Byte]): String = sha256(new java.io.ByteArrayInputStream(bytes))

  /** SHA-256 of the bytes of the streams, one after another (each is opened, read and closed). */
  def sha256(streams: Seq[() => InputStream]): String = {
    val digest = MessageDigest.getInstance("SHA-256")
    val buffer = new Array[Byte](1 << 20)
    streams.foreach { open =>
      val stream = new DigestInputStream(open(), digest)
      try while (stream.read(buffer) >= 0) {}
      finally stream.close()
    }
    digest.digest().map(b => f"$b%02x").mkString
  }

  /** The driver's local copy of payload bytes, named by their hash (what `addFile` ships). */
  private def payloadFile(hash: String): File = payloadFiles.get(hash)

  def ofPayload(bytes: Array[Byte], what: String): ModelInfo = ofPayload(bytes, what, sha256(bytes))

  /** [[ofPayload]] of bytes whose SHA-256 the caller knows. */
  def ofPayload(bytes: Array[Byte], what: String, hash: String): ModelInfo =
    Option(byContent.get(hash)).getOrElse {
      val info = inspectPayload(bytes, hash, what)
      byContent.put(hash, info)
      info
    }

  private def inspectPayload(bytes: Array[Byte], hash: String, what: String): ModelInfo = {
    val external =
      try OnnxGraph.externalDataLocations(bytes)
      catch {
        case e: OnnxGraph.ExternalDataOutside =>
          throw new IllegalArgumentException(s"$what: ${e.getMessage}", e)
        case NonFatal(_) => Nil // not a model: ONNX Runtime says why below
      }
    if (external.nonEmpty)
      throw new IllegalArgumentException(
        s"$what keeps tensor data in external files (${external.mkString(", ")}), which model " +
          "bytes cannot carry; give the model as modelLocation, with those files next to it"
      )
    val file = payloadFiles.computeIfAbsent(
      hash,
      _ => {
        val f = new File(TempFiles.createDir("mmlspark-onnx"), s"mmlspark-onnx-$hash.onnx")
        Files.write(f.toPath, bytes)
        f
      }
    )
    inspect(ShippedModel(hash, file.getName), file.getPath, what)
  }

  /** The model at a Hadoop filesystem `location`, with the external data files it names next to it;
    * cached by path, size and modification time of the model and of those files.
    */
  def ofLocation(location: String, spark: SparkSession, what: String): ModelInfo = {
    val conf = spark.sparkContext.hadoopConfiguration
    val path = new Path(location)
    val (fs, status) =
      try {
        val fs = path.getFileSystem(conf)
        (fs, fs.getFileStatus(path))
      } catch {
        case NonFatal(e) =>
          throw new IllegalArgumentException(s"$what: cannot read the model at '$location': $e", e)
      }
    val qualified = status.getPath
    def externalStatus(locations: Seq[String]): Seq[Any] = locations.map { l =>
      val file = new Path(qualified.getParent, l)
      val s =
        try fs.getFileStatus(file)
        catch {
          case _: java.io.FileNotFoundException =>
            throw new IllegalArgumentException(
              s"$what keeps tensor data in '$l', but there is no file '$file'"
            )
        }
      (l, s.getLen, s.getModificationTime)
    }
    val key = (qualified.toString, status.getLen, status.getModificationTime)
    Option(byLocation.get(key)) match {
      case Some((info, external)) if externalStatus(info.externalData) == external => info
      case _ =>
        val local =
          if (fs.getScheme == "file") new File(fs.makeQualified(qualified).toUri).getPath
          else // to learn the external files; the source then copies the model with them
            HadoopModel.copyToLocal(fs, qualified, Nil, "model.onnx")
        val external =
          try locations(java.nio.file.Paths.get(local), what)
          finally
            if (fs.getScheme != "file") TempFiles.deleteRecursively(new File(local).getParentFile)
        val statuses = externalStatus(external)
        val hash = sha256(
          (qualified +: external.map(new Path(qualified.getParent, _))).map(p => () => fs.open(p))
        )
        val source =
          HadoopModel(hash, qualified.toString, external, new SerializableConfiguration(conf))
        val info = inspect(source, source.localFile(), what)
        byLocation.put(key, (info, statuses))
        info
    }
  }

  /** The external data files of the model file `model`; none for a file that is not a model (ONNX
    * Runtime then says what is wrong with it).
    */
  private def locations(model: java.nio.file.Path, what: String): Seq[String] =
    try OnnxGraph.externalDataLocations(model)
    catch {
      case e: OnnxGraph.ExternalDataOutside =>
        throw new IllegalArgumentException(s"$what: ${e.getMessage}", e)
      case NonFatal(_) => Nil
    }

  private def inspect(source: ModelSource, localFile: String, what: String): ModelInfo = {
    inspected.incrementAndGet()
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
          PlanMessages.NotLoadable(
            "what" -> what,
            "version" -> OrtSessions.environment.getVersion,
            "error" -> e.getMessage
          ),
          e
        )
    } finally options.close()
  }
}
