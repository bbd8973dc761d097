package mmlspark.onnx

import scala.util.control.NonFatal

import mmlspark.contracts.{Choices, SchemaUtils, StageWritable}
import org.apache.hadoop.fs.{FileUtil, Path}
import org.apache.spark.ml.mmlspark.ParamsIO
import org.apache.spark.ml.param.Params
import org.apache.spark.sql.SparkSession
import org.json4s.JArray
import org.json4s.jackson.JsonMethods.{compact, render}

/** A stage that runs an ONNX model: the model comes from `modelLocation` (a Hadoop filesystem path)
  * or from bytes (`setModelPayload`, which take precedence), and is saved with the stage as a plain
  * `model.onnx` file next to its metadata. A loaded stage runs the model saved with it.
  */
trait HasOnnxModel extends Params with HasOnnxModelDecls with StageWritable {

  // The model bytes, when given as bytes.
  private var payload: Array[Byte] = _
  @transient private var payloadInfo: ModelInfo = _
  @transient private var payloadHash: String = _
  // In a stage loaded from a save whose model keeps its weights in external data files: the saved
  // model.onnx, run in place with those files beside it.
  private var savedModel: String = _

  /** Sets the model from its bytes (takes precedence over `modelLocation`). */
  def setModelPayload(bytes: Array[Byte]): this.type = synchronized {
    require(bytes != null && bytes.nonEmpty, s"${SchemaUtils.stageName(this)}: empty model payload")
    payload = bytes
    payloadInfo = null
    payloadHash = null
    savedModel = null
    this
  }

  /** The model bytes set with [[setModelPayload]] (or loaded with the stage), or null. A loaded
    * model with external data files has none: it runs from its save.
    */
  def getModelPayload: Array[Byte] = payload

  private def noModel: Nothing = throw new IllegalArgumentException(
    s"${SchemaUtils.stageName(this)}: ${PlanMessages.NoModel()}"
  )

  /** The model file the stage runs when it has no payload: the saved one, else `modelLocation`. */
  private def modelPath: Option[String] =
    Option(savedModel).orElse(if (isDefined(modelLocation)) Some($(modelLocation)) else None)

  /** The model's source, inputs and outputs, read once on the driver. */
  def modelInfo: ModelInfo = synchronized {
    val what = s"${SchemaUtils.stageName(this)}: the model"
    if (payload != null) {
      if (payloadInfo == null)
        payloadInfo = ModelInfo.ofPayload(payload, what + " payload", modelContentHash)
      payloadInfo
    } else
      modelPath match {
        case Some(location) =>
          ModelInfo.ofLocation(location, SparkSession.active, s"$what at '$location'")
        case None => noModel
      }
  }

  /** The SHA-256 of the model, for caches of what is derived from it: of the bytes for a payload,
    * without opening them in ONNX Runtime (as [[modelInfo]] does); else the inspected model's.
    */
  def modelContentHash: String = synchronized {
    if (payload == null) modelInfo.source.hash
    else {
      if (payloadHash == null) payloadHash = ModelInfo.sha256(payload)
      payloadHash
    }
  }

  def getModelInputs: Seq[TensorSpec] = modelInfo.inputs
  def getModelOutputs: Seq[TensorSpec] = modelInfo.outputs

  /** The inputs as JSON (name, type, shape with -1 for dynamic dimensions, dimension names). */
  def getModelInputsJson: String = compact(render(JArray(getModelInputs.map(_.toJson).toList)))
  def getModelOutputsJson: String = compact(render(JArray(getModelOutputs.map(_.toJson).toList)))

  /** The model bytes, read from the model file when there is no payload. */
  def modelBytes(spark: SparkSession): Array[Byte] =
    if (payload != null) payload
    else
      modelPath match {
        case Some(location) => HasOnnxModel.read(new Path(location), spark)
        case None => noModel
      }

  /** Gives `other` (a copy of this stage) the same model bytes. */
  protected def copyModelTo(other: HasOnnxModel): Unit = synchronized {
    other.payload = payload
    other.payloadInfo = payloadInfo
    other.payloadHash = payloadHash
    other.savedModel = savedModel
  }

  /** Writes the model as `model.onnx` under `path` (empty for a stage with no model), and the
    * external data files it names beside it, so that the save runs wherever it is loaded.
    */
  override def saveData(path: String, spark: SparkSession): Unit = {
    val conf = spark.sparkContext.hadoopConfiguration
    val target = new Path(path, HasOnnxModel.modelFile)
    val fs = target.getFileSystem(conf)
    val bytes =
      if (payload != null || modelPath.isDefined) modelBytes(spark) else Array.emptyByteArray
    val external =
      if (payload != null || modelPath.isEmpty) Nil
      else
        try OnnxGraph.externalDataLocations(bytes)
        catch {
          case e: OnnxGraph.ExternalDataOutside =>
            throw new IllegalArgumentException(s"${SchemaUtils.stageName(this)}: ${e.getMessage}")
        }
    val out = fs.create(target)
    try out.write(bytes)
    finally out.close()
    if (external.nonEmpty) {
      val source = new Path(modelPath.get)
      val sourceFs = source.getFileSystem(conf)
      external.foreach { l =>
        val from = new Path(source.getParent, l)
        if (!sourceFs.exists(from))
          throw new IllegalArgumentException(
            s"${SchemaUtils.stageName(this)}: the model at '$source' keeps tensor data in '$l', " +
              s"but there is no file '$from' to save with it"
          )
        FileUtil.copy(sourceFs, from, fs, new Path(path, l), false, true, conf)
      }
    }
  }

  /** What [[HasOnnxModel.loadModel]] found: the model bytes, or the saved model file. */
  private[onnx] def setSavedModel(bytes: Array[Byte], file: String): Unit = synchronized {
    if (file == null) setModelPayload(bytes)
    else {
      payload = null
      payloadInfo = null
      payloadHash = null
      savedModel = file
    }
  }
}

object HasOnnxModel {

  val modelFile = "model.onnx"

  private[onnx] def read(file: Path, spark: SparkSession): Array[Byte] = {
    val in = file.getFileSystem(spark.sparkContext.hadoopConfiguration).open(file)
    try in.readAllBytes()
    finally in.close()
  }

  /** Gives `stage` the model saved under `path`: its bytes, or for a model with external data
    * files, the saved model file (run where it lies, beside them). A stage runs only the model
    * saved with it: a missing `model.onnx` or external data file fails here, naming it.
    */
  def loadModel[S <: HasOnnxModel](stage: S, path: String, spark: SparkSession): S = {
    val file = new Path(path, modelFile)
    val fs = file.getFileSystem(spark.sparkContext.hadoopConfiguration)
    def cannot(why: String): Nothing = throw new IllegalArgumentException(
      s"${SchemaUtils.stageName(stage)}: cannot load the stage saved at '$path': $why " +
        "(a saved stage runs only the model saved with it)"
    )
    if (!fs.exists(file)) cannot(s"its model file '$file' is missing")
    val bytes = read(file, spark)
    if (bytes.isEmpty) {
      // Saved without a model, which is only right if it named none.
      ParamsIO.loadMetadata(path, spark, stage.getClass.getName).setOn(stage)
      if (stage.isDefined(stage.modelLocation))
        cannot(
          s"its model file '$file' is empty, but the stage was saved with modelLocation " +
            s"'${stage.getModelLocation}'"
        )
    } else {
      val external =
        try OnnxGraph.externalDataLocations(bytes)
        catch {
          case e: OnnxGraph.ExternalDataOutside => cannot(e.getMessage)
          case NonFatal(_) => Nil // not a model: ONNX Runtime says why when it is used
        }
      external.map(new Path(path, _)).find(f => !fs.exists(f)).foreach { missing =>
        cannot(s"its model keeps tensor data in '$missing', which is missing")
      }
      stage.setSavedModel(bytes, if (external.isEmpty) null else fs.makeQualified(file).toString)
    }
    stage
  }
}

/** Where a model runs. */
trait HasDeviceType extends Params with HasDeviceTypeDecls {

  setDefault(deviceType -> "auto")

}

object HasDeviceType {

  /** `deviceType`, in any case ('CPU' and 'CUDA' as SynapseML spells them); 'gpu' means 'cuda'. */
  val DeviceTypes: Choices = Choices(Seq("auto", "cpu", "cuda"), Map("gpu" -> "cuda"))
}
