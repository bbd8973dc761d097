package mmlspark.onnx

import mmlspark.contracts._
import mmlspark.opencv.ImageTransformer
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param._
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions.{coalesce, col, concat, lit, raise_error, when}
import org.apache.spark.sql.types.{BinaryType, StringType, StructType}

/** Turns images into feature vectors with an image model cut at an intermediate node: the headless
  * featurizer of transfer learning, in one stage. The input is an image struct or encoded image
  * bytes (decoded in the same pass, at a reduced JPEG scale with `reducedDecode`).
  *
  * Each image is resized to `imageHeight` x `imageWidth`, scaled by `colorScaleFactor`, normalized
  * with `channelMeans` and `channelStds` and laid out as a CHW tensor (`ImageTransformer`); the
  * model, cut so that `featureTensorName` (a node or tensor of its graph) is its output, turns the
  * tensor into the `outputCol` vector (`ONNXModel`). The cut is made by the library on the model's
  * graph; the saved stage keeps the whole model.
  *
  * As SynapseML's stage of this name does, it drops the rows that give no vector (`dropNa`), fails
  * on encoded bytes that cannot be decoded (unless `ignoreDecodingErrors`), and converts gray
  * images to color (`autoConvertToColor`). With `dropNa=false` every row is kept: one whose image
  * is null or cannot be processed gets a null vector and the reason in `errorCol`.
  *
  * It lived in `image` before it moved here, beside SynapseML's; stages saved under that name still
  * load (see `mmlspark.image.ImageFeaturizer`).
  */
final class ImageFeaturizer(override val uid: String)
    extends Transformer
    with ImageFeaturizerDecls {

  def this() = this(Identifiable.randomUID("ImageFeaturizer"))

  setDefault(
    dropNa -> true,
    ignoreDecodingErrors -> false,
    autoConvertToColor -> true,
    inputCol -> "image",
    outputCol -> "features",
    errorCol -> "featurizeError",
    imageHeight -> 224,
    imageWidth -> 224,
    channelMeans -> Array(0.485, 0.456, 0.406),
    channelStds -> Array(0.229, 0.224, 0.225),
    colorScaleFactor -> 1.0 / 255,
    tensorChannelOrder -> "RGB",
    reducedDecode -> true,
    miniBatchSize -> 64
  )

  private def tensorCol = s"__tensor_$uid"
  private def imageErrorCol = s"__imageError_$uid"
  private def modelErrorCol = s"__modelError_$uid"

  // The cut model, by (model hash, feature tensor name), as an ONNXModel that has read its inputs
  // and outputs: cutting rewrites the whole model, and inspecting it opens an ONNX Runtime
  // session, so neither is repeated for every transformSchema and transform.
  @transient private var cut: ((String, Option[String]), ONNXModel) = _

  private def cutModel(spark: SparkSession): ONNXModel = synchronized {
    // Keyed by the bytes' hash, not by the inspected model: ONNX Runtime opens only the model that
    // runs (the cut one where there is a feature tensor), which proves it loads before any job.
    val key = (modelContentHash, get(featureTensorName))
    if (cut == null || cut._1 != key) {
      val stage = SchemaUtils.stageName(this)
      val model = key._2 match {
        case Some(name) =>
          val bytes =
            try OnnxGraph.cut(modelBytes(spark), Seq(name))
            catch {
              case e: IllegalArgumentException =>
                throw new IllegalArgumentException(s"$stage: ${e.getMessage}", e)
            }
          val cutOne = new ONNXModel().setModelPayload(bytes)
          try cutOne.modelInfo
          catch {
            case e: IllegalArgumentException =>
              throw new IllegalArgumentException(
                s"$stage: the model cut at $name: ${e.getMessage}",
                e
              )
          }
          cutOne
        case None =>
          modelInfo // the load check, in this stage's name (the model below then finds it done)
          val whole = new ONNXModel().setModelPayload(modelBytes(spark))
          whole.modelInfo // held by the model and its copies, which then never hash the bytes
          whole
      }
      cut = (key, model)
    }
    cut._2.copy(ParamMap.empty)
  }

  /** Per-channel values given in `tensorChannelOrder`, in the RGB order `normalize` takes. */
  private def inRgbOrder(values: Array[Double]): Array[Double] =
    if (Choices.channelOrder($(tensorChannelOrder)) == "BGR") values.reverse else values

  /** The two stages this one runs: preprocessing, then the cut model. */
  private def stages(spark: SparkSession): (ImageTransformer, ONNXModel) = {
    val preprocess: ImageTransformer = new ImageTransformer()
      .setInputCol($(inputCol))
      .setOutputCol(tensorCol)
      .setErrorCol(imageErrorCol)
      .setToTensor(true)
      .setTensorChannelOrder($(tensorChannelOrder))
      .setReducedDecode($(reducedDecode))
      .resize($(imageHeight), $(imageWidth))
    if ($(autoConvertToColor)) preprocess.colorFormat("BGR")
    preprocess.normalize(
      inRgbOrder($(channelMeans)),
      inRgbOrder($(channelStds)),
      $(colorScaleFactor)
    )
    val model = cutModel(spark)
    val inputs = model.getModelInputs
    SchemaUtils.require(
      this,
      inputs.length == 1,
      s"the featurizing model must have one input (the image tensor) but has ${inputs.map(_.describe).mkString(", ")}"
    )
    val outputs = model.getModelOutputs
    model
      .setFeedDict(Map(inputs.head.name -> tensorCol))
      .setFetchDict(Map($(outputCol) -> outputs.head.name))
      .setVectorOutputs(true)
      .setErrorCol(modelErrorCol)
      .setMiniBatchSize($(miniBatchSize))
      .setDeviceType($(deviceType))
    (preprocess, model)
  }

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ImageTransformer.InputColumn)
    SchemaUtils.requireAbsent(this, schema, $(errorCol))
    val (preprocess, model) = stages(SparkSession.active)
    val full = model.transformSchema(preprocess.transformSchema(schema))
    StructType(schema.fields :+ full($(outputCol))).add($(errorCol), StringType)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val (preprocess, model) = stages(dataset.sparkSession)
    val scored = model.transform(preprocess.transform(dataset))
    val encoded = dataset.schema($(inputCol)).dataType == BinaryType
    val checked =
      if (!encoded || $(ignoreDecodingErrors)) scored
      else {
        // A filter, unlike a column, runs even when the error column is not selected.
        val undecodable =
          col(imageErrorCol).isNotNull && col(SchemaUtils.quoted($(inputCol))).isNotNull
        val message = concat(
          lit(
            s"${SchemaUtils.stageName(this)}: an image cannot be decoded (set " +
              "ignoreDecodingErrors=true to give it a null vector and the reason in errorCol): "
          ),
          col(imageErrorCol)
        )
        scored.filter(when(undecodable, raise_error(message)).isNull)
      }
    val out = checked
      .withColumn($(errorCol), coalesce(col(imageErrorCol), col(modelErrorCol)))
      .drop(tensorCol, imageErrorCol, modelErrorCol)
    if ($(dropNa)) out.filter(col(SchemaUtils.quoted($(outputCol))).isNotNull) else out
  }

  override def copy(extra: ParamMap): ImageFeaturizer = {
    val copied = defaultCopy[ImageFeaturizer](extra)
    copyModelTo(copied)
    copied
  }
}

object ImageFeaturizer extends StageReadable[ImageFeaturizer] {
  override protected def create(uid: String, path: String, spark: SparkSession): ImageFeaturizer =
    HasOnnxModel.loadModel(new ImageFeaturizer(uid), path, spark)

  /** A stage saved before dropNa, ignoreDecodingErrors and autoConvertToColor existed kept every
    * row, gave undecodable images a null vector and fed gray images as they were: it still does.
    */
  override protected def loaded(stage: ImageFeaturizer, savedParams: Set[String]): Unit = {
    if (!savedParams("dropNa")) stage.setDropNa(false)
    if (!savedParams("ignoreDecodingErrors")) stage.setIgnoreDecodingErrors(true)
    if (!savedParams("autoConvertToColor")) stage.setAutoConvertToColor(false)
  }
}
