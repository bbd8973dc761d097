package mmlspark.detection

import mmlspark.contracts._
import mmlspark.onnx.{HasOnnxModel, ONNXModel, TensorSpec}
import mmlspark.opencv.{ImageTransformer, Letterbox, LetterboxGeometry}
import mmlspark.pixels.ImageRead
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param._
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Encoders, Row, SparkSession}
import org.apache.spark.sql.functions.{coalesce, col, struct}
import org.apache.spark.sql.types._

/** Finds objects in images with a YOLO-family ONNX detector (YOLOv5 layout, as MegaDetector v5, or
  * the YOLOv8 layout of newer Ultralytics exports), one row of detections per image.
  *
  * Each image (an image struct, or encoded image bytes decoded in the same pass, EXIF orientation
  * applied, at a reduced JPEG scale with `reducedDecode`) is letterboxed to `imageSize` x
  * `imageSize` (scaled keeping its aspect ratio, bilinear, padded evenly with 114), laid out as an
  * RGB CHW tensor of values / 255 and run through the model (`ONNXModel`: one session per executor,
  * batches of `miniBatchSize` images; on a CPU through the inference service, where the benchmark
  * protocol measured detection faster with it, unless `spark.mmlspark.onnx.inferenceService` is
  * false; on a GPU without it, as every ONNXModel). The output is decoded ([[YoloLayout]],
  * `modelFormat`), boxes under `confidenceThreshold` are dropped, overlapping boxes of a class
  * suppressed (`iouThreshold`) and at most `maxDetections` kept, the most confident first. Each
  * detection is a struct as MegaDetector writes it: `category` (the 1-based class id as a string),
  * `label` (from `classNames`), `conf` and `bbox` = [x_min, y_min, width, height] as fractions of
  * the image.
  *
  * On `read_images`' own output the detector reads each file itself, decoding it once at the
  * reduced scale, as an `ImageTransformer` does there; the full-size `image` is then computed only
  * where it is selected.
  *
  * An image with no detection over the threshold gets an empty array; a null or undecodable image
  * gets null and the reason in `errorCol`.
  */
final class ObjectDetector(override val uid: String) extends Transformer with ObjectDetectorDecls {

  def this() = this(Identifiable.randomUID("ObjectDetector"))

  final val modelFormat: Param[String] = new Param[String](
    this,
    "modelFormat",
    s"layout of the detector's output: ${YoloLayout.Formats.describe}; 'yolov5' is [N, K, 5+C] " +
      "(cx, cy, w, h, objectness, C class scores), 'yolov8' is [N, 4+C, K] (cx, cy, w, h, C class " +
      "scores); 'auto' tells them apart by the output's shape",
    YoloLayout.Formats.isValid
  )

  setDefault(
    inputCol -> "image",
    outputCol -> "detections",
    errorCol -> "detectionError",
    modelFormat -> "auto",
    confidenceThreshold -> 0.005,
    iouThreshold -> 0.45,
    maxDetections -> 300,
    classNames -> Array("animal", "person", "vehicle"),
    miniBatchSize -> 8,
    reducedDecode -> true
  )

  def getModelFormat: String = $(modelFormat)
  def setModelFormat(value: String): this.type = set(modelFormat, value)

  private def tensorCol = s"__tensor_$uid"
  private def sizeCol = s"__size_$uid"
  private def rawCol = s"__raw_$uid"
  private def imageErrorCol = s"__imageError_$uid"
  private def modelErrorCol = s"__modelError_$uid"

  private def fail(message: String): Nothing =
    throw new IllegalArgumentException(s"${SchemaUtils.stageName(this)}: $message")

  /** What the model takes and gives: the letterbox size, the model input, the detection output and
    * its layout.
    */
  private case class Plan(size: Int, input: TensorSpec, output: TensorSpec, layout: YoloLayout)

  private def plan: Plan = {
    val inputs = getModelInputs
    if (inputs.length != 1)
      fail(DetectorPlanMessages.InputCount("count" -> inputs.length))
    val input = inputs.head
    val shape = input.rowShape
    if (shape.length != 3 || (shape.head >= 0 && shape.head != 3))
      fail(DetectorPlanMessages.NotImage("input" -> input.describe))
    val (h, w) = (shape(1), shape(2))
    if (h >= 0 && w >= 0 && h != w)
      fail(DetectorPlanMessages.NotSquare("input" -> input.describe))
    val fixed = if (h >= 0) Some(h.toInt) else if (w >= 0) Some(w.toInt) else None
    val size = (get(imageSize), fixed) match {
      case (Some(s), Some(f)) if s != f =>
        fail(
          DetectorPlanMessages.SizeMismatch("size" -> s, "fixed" -> f, "input" -> input.describe)
        )
      case (Some(s), _) => s
      case (None, f) => f.getOrElse(ObjectDetector.DefaultImageSize)
    }
    val output = getModelOutputs.headOption.getOrElse(fail(DetectorPlanMessages.NoOutput()))
    val layout =
      try YoloLayout.resolve(output.rowShape, $(modelFormat))
      catch {
        case e: IllegalArgumentException =>
          fail(
            DetectorPlanMessages.BadOutput("output" -> output.describe, "error" -> e.getMessage)
          )
      }
    if ($(classNames).length != layout.classes)
      fail(
        DetectorPlanMessages.ClassCount(
          "classes" -> layout.classes,
          "output" -> output.describe,
          "format" -> layout.format,
          "count" -> $(classNames).length,
          "names" -> $(classNames).mkString(", ")
        )
      )
    Plan(size, input, output, layout)
  }

  private def model(p: Plan): ONNXModel = {
    val m = new ONNXModel()
      .setFeedDict(Map(p.input.name -> tensorCol))
      .setFetchDict(Map(rawCol -> p.output.name))
      .setErrorCol(modelErrorCol)
      .setMiniBatchSize($(miniBatchSize))
      .setDeviceType($(deviceType))
      // On a CPU too, the protocol measured detection faster with the inference service
      // (bench/detection.py): the task decodes and letterboxes its next photos while it runs.
      .setServiceAutoOnCpu(true)
    get(modelLocation).foreach(m.setModelLocation)
    copyModelTo(m)
    m
  }

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ImageTransformer.InputColumn)
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    SchemaUtils.requireAbsent(this, schema, $(errorCol))
    SchemaUtils.requireDistinct(this, "outputCol and errorCol", Seq($(outputCol), $(errorCol)))
    plan
    schema
      .add($(outputCol), ObjectDetector.DetectionsType, nullable = true)
      .add($(errorCol), StringType)
  }

  /** Letterboxes each image into a tensor, with the size of the image it came from. */
  private def letterboxed(dataset: Dataset[_], size: Int): DataFrame = {
    val target = if ($(reducedDecode)) Letterbox(size).minInputSize else None
    DeferredColumns.of(dataset) match {
      case Some(d @ Deferred(_, _, _, _, Some(read: ImageRead))) if $(inputCol) == "image" =>
        fromFiles(d, read, size, target)
      case _ =>
        val input = col(SchemaUtils.quoted($(inputCol)))
        val prepare =
          if (dataset.schema($(inputCol)).dataType == BinaryType)
            RowResults.udf1((bytes: Array[Byte]) =>
              ImageTransformer.decodeAndRun(Nil, target)(bytes, ObjectDetector.toTensor(size))
            )
          else
            RowResults.udf1((image: Row) =>
              ImageTransformer.run(Nil)(image, ObjectDetector.toTensor(size))
            )
        prepared(dataset.toDF().withColumn(preparedCol, prepare(input)), size)
    }
  }

  /** Letterboxing on `read_images`' own output, `d`, as an `ImageTransformer` does there: each task
    * reads the file at `path` and decodes it once, at the smallest JPEG scale that covers the
    * letterbox when the read is at full size (with `reducedDecode`) or as the read decodes it;
    * `error` is the read's error, from the same pass, and `image` stays deferred, computed only
    * where read (a 12 MP photo is never decoded at full size unless it is selected).
    */
  private def fromFiles(
      d: Deferred,
      read: ImageRead,
      size: Int,
      target: Option[(Int, Int)]
  ): DataFrame = {
    val scale = read.settings.scaleFor(target)
    val fused = ImageTransformer.fileUdf(
      read,
      scale,
      Nil,
      (image: mmlspark.opencv.Image, _: String) => ObjectDetector.toTensor(size)(image)
    )
    val base = prepared(
      d.base
        .withColumn(preparedCol, fused(col("path"), col(read.listingErrorCol)))
        .withColumn("error", col(s"$preparedCol.readError")),
      size
    )
    read.deferredOver(d, base, Seq(tensorCol, sizeCol, imageErrorCol))
  }

  private def preparedCol = s"__prepared_$uid"

  /** `df`'s letterboxing result (a struct of a [[Letterboxed]] `value` and an `error`, in
    * [[preparedCol]]) as the tensor, size and image error columns the model and decoding read.
    */
  private def prepared(df: DataFrame, size: Int): DataFrame = {
    val shape = new MetadataBuilder().putLongArray("tensorShape", Array(3L, size, size)).build()
    df.withColumn(tensorCol, col(s"$preparedCol.value.tensor").as(tensorCol, shape))
      .withColumn(
        sizeCol,
        struct(col(s"$preparedCol.value.height"), col(s"$preparedCol.value.width"))
      )
      .withColumn(imageErrorCol, col(s"$preparedCol.error"))
      .drop(preparedCol)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val p = plan
    val decoder = YoloDecoder(
      p.layout,
      $(confidenceThreshold),
      $(iouThreshold),
      $(maxDetections),
      $(classNames).toSeq
    )
    val size = p.size
    val decode = RowResults.udf2 { (raw: Array[Float], imageSize: Row) =>
      decoder(raw, LetterboxGeometry(imageSize.getInt(0), imageSize.getInt(1), size))
    }
    val scored = model(p).transform(letterboxed(dataset, size))
    val tmp = s"__decoded_$uid"
    scored
      .withColumn(tmp, decode(col(rawCol), col(sizeCol)))
      .withColumn($(outputCol), col(s"$tmp.value"))
      .withColumn($(errorCol), coalesce(col(imageErrorCol), col(modelErrorCol), col(s"$tmp.error")))
      .drop(tmp, tensorCol, sizeCol, rawCol, imageErrorCol, modelErrorCol)
  }

  override def copy(extra: ParamMap): ObjectDetector = {
    val copied = defaultCopy[ObjectDetector](extra)
    copyModelTo(copied)
    copied
  }
}

/** One image, letterboxed: the tensor and the size of the image it was made from. */
final case class Letterboxed(tensor: Array[Float], height: Int, width: Int)

object ObjectDetector extends StageReadable[ObjectDetector] {

  val DefaultImageSize = 640

  /** The type of the detections column: MegaDetector's fields. */
  val DetectionsType: DataType = ArrayType(Encoders.product[Detection].schema)

  /** The letterboxed RGB CHW tensor of values / 255 of an image, with the image's size. */
  private[detection] def toTensor(size: Int)(image: mmlspark.opencv.Image): Letterboxed = {
    val (height, width) = (image.mat.rows(), image.mat.cols())
    val boxed = Letterbox(size)(image)
    val chw =
      try ImageTransformer.toCHW(boxed, "RGB")
      finally boxed.mat.release()
    var i = 0
    while (i < chw.length) { chw(i) /= 255f; i += 1 }
    Letterboxed(chw, height, width)
  }

  override protected def create(uid: String, path: String, spark: SparkSession): ObjectDetector =
    HasOnnxModel.loadModel(new ObjectDetector(uid), path, spark)
}
