package mmlspark.onnx

import mmlspark.contracts.{SchemaUtils, StageWritable}
import org.apache.hadoop.fs.Path
import org.apache.spark.ml.param.{Param, ParamValidators, Params}
import org.apache.spark.sql.SparkSession
import org.json4s.JArray
import org.json4s.jackson.JsonMethods.{compact, render}

/** A stage that runs an ONNX model: the model comes from `modelLocation` (a Hadoop filesystem path)
  * or from bytes (`setModelPayload`, which take precedence), and is saved with the stage as a plain
  * `model.onnx` file next to its metadata. A loaded stage runs the model saved with it.
  */
trait HasOnnxModel extends Params with StageWritable {

  final val modelLocation: Param[String] = new Param[String](
    this,
    "modelLocation",
    "path of the ONNX model file on any Hadoop filesystem (local, hdfs:, s3a:, abfss:, dbfs: ...), " +
      "read once per executor; a payload set with setModelPayload takes precedence (default: none)",
    (p: String) => p != null && p.nonEmpty
  )

  def getModelLocation: String = $(modelLocation)
  def setModelLocation(value: String): this.type = set(modelLocation, value)

  // The model bytes, when given as bytes.
  private var payload: Array[Byte] = _
  @transient private var payloadInfo: ModelInfo = _

  /** Sets the model from its bytes (takes precedence over `modelLocation`). */
  def setModelPayload(bytes: Array[Byte]): this.type = synchronized {
    require(bytes != null && bytes.nonEmpty, s"${SchemaUtils.stageName(this)}: empty model payload")
    payload = bytes
    payloadInfo = null
    this
  }

  /** The model bytes set with [[setModelPayload]] (or loaded with the stage), or null. */
  def getModelPayload: Array[Byte] = payload

  private def noModel: Nothing = throw new IllegalArgumentException(
    s"${SchemaUtils.stageName(this)}: no model; set modelLocation or a model payload"
  )

  /** The model's source, inputs and outputs, read once on the driver. */
  def modelInfo: ModelInfo = synchronized {
    val what = s"${SchemaUtils.stageName(this)}: the model"
    if (payload != null) {
      if (payloadInfo == null) payloadInfo = ModelInfo.ofPayload(payload, what + " payload")
      payloadInfo
    } else if (isDefined(modelLocation))
      ModelInfo.ofLocation($(modelLocation), SparkSession.active, s"$what at '${$(modelLocation)}'")
    else noModel
  }

  def getModelInputs: Seq[TensorSpec] = modelInfo.inputs
  def getModelOutputs: Seq[TensorSpec] = modelInfo.outputs

  /** The inputs as JSON (name, type, shape with -1 for dynamic dimensions, dimension names). */
  def getModelInputsJson: String = compact(render(JArray(getModelInputs.map(_.toJson).toList)))
  def getModelOutputsJson: String = compact(render(JArray(getModelOutputs.map(_.toJson).toList)))

  /** The model bytes, read from `modelLocation` when there is no payload. */
  def modelBytes(spark: SparkSession): Array[Byte] =
    if (payload != null) payload
    else if (isDefined(modelLocation)) {
      val source = new Path($(modelLocation))
      val in = source.getFileSystem(spark.sparkContext.hadoopConfiguration).open(source)
      try in.readAllBytes()
      finally in.close()
    } else noModel

  /** Gives `other` (a copy of this stage) the same model bytes. */
  protected def copyModelTo(other: HasOnnxModel): Unit = synchronized {
    other.payload = payload
    other.payloadInfo = payloadInfo
  }

  override def saveData(path: String, spark: SparkSession): Unit = {
    val target = new Path(path, HasOnnxModel.modelFile)
    val fs = target.getFileSystem(spark.sparkContext.hadoopConfiguration)
    val bytes =
      if (payload != null || isDefined(modelLocation)) modelBytes(spark) else Array.emptyByteArray
    val out = fs.create(target)
    try out.write(bytes)
    finally out.close()
  }
}

object HasOnnxModel {

  val modelFile = "model.onnx"

  /** Gives `stage` the model saved under `path` (nothing if it was saved without one). */
  def loadModel[S <: HasOnnxModel](stage: S, path: String, spark: SparkSession): S = {
    val file = new Path(path, modelFile)
    val fs = file.getFileSystem(spark.sparkContext.hadoopConfiguration)
    if (fs.exists(file) && fs.getFileStatus(file).getLen > 0) {
      val in = fs.open(file)
      try stage.setModelPayload(in.readAllBytes())
      finally in.close()
    }
    stage
  }
}

/** Where a model runs. */
trait HasDeviceType extends Params {

  final val deviceType: Param[String] = new Param[String](
    this,
    "deviceType",
    "where the model runs: 'auto' (CUDA when the executor's ONNX Runtime has it, else CPU), " +
      "'cpu', or 'cuda' (an error without CUDA); the GPU is the task's Spark 'gpu' resource " +
      "(default: auto)",
    ParamValidators.inArray(Array("auto", "cpu", "cuda"))
  )

  setDefault(deviceType -> "auto")

  def getDeviceType: String = $(deviceType)
  def setDeviceType(value: String): this.type = set(deviceType, value)
}
