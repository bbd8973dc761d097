package mmlspark.detection

import mmlspark.contracts._
import mmlspark.opencv.{Image, ImageTransformer}
import mmlspark.pixels.{ImageSchemaUtils, ImageStruct}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param._
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row}
import org.apache.spark.sql.functions.{col, explode, explode_outer, udf}
import org.apache.spark.sql.types._
import org.opencv.core.{Core, Mat, Rect, Scalar}

/** Turns detections into crops, one row per detection: each detection of `detectionsCol` (as
  * [[ObjectDetector]] writes them) whose `conf` is at least `confidenceThreshold`, and whose
  * category is among `categories` when set, becomes a row holding the other input columns (the
  * parent's path among them), the detection's index in the parent's array (`detectionIndexCol`),
  * the detection itself (`detectionCol`) and the crop of the parent image (`outputCol`, an image
  * struct with the parent's origin) at the image's full resolution; encoded bytes are decoded with
  * their EXIF orientation, as the detector saw them.
  *
  * With `square`, a crop is widened to a square around the box (the longer side of the box), moved
  * to stay inside the image, and padded evenly with black where the image is narrower than the
  * square, as MegaDetector's crop scripts do, so that a classifier's square resize keeps the
  * animal's proportions. A parent image that cannot be read gives its detections null crops and the
  * reason in `errorCol`. A row none of whose detections is cropped (none chosen, or null) gives no
  * rows, or with `keepUncropped` one row with null index, detection and crop, as `explode_outer`
  * does: a job that reports per image (empty ones too) then needs no second pass over its images.
  */
final class CropDetections(override val uid: String)
    extends Transformer
    with CropDetectionsDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("CropDetections"))

  setDefault(
    inputCol -> "image",
    detectionsCol -> "detections",
    outputCol -> "crop",
    errorCol -> "cropError",
    detectionCol -> "detection",
    detectionIndexCol -> "detectionIndex",
    confidenceThreshold -> 0.2,
    categories -> Array.empty[String],
    square -> false,
    keepUncropped -> false
  )

  private def added: Seq[String] =
    Seq($(detectionIndexCol), $(detectionCol), $(outputCol), $(errorCol))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ImageTransformer.InputColumn)
    SchemaUtils.requireColumnType(
      this,
      schema,
      $(detectionsCol),
      "an array of detections (category, label, conf, bbox), as ObjectDetector writes them"
    )(CropDetections.isDetections)
    val kept = schema.fields.filterNot(_.name == $(inputCol))
    added.foreach(c => SchemaUtils.requireAbsent(this, StructType(kept), c))
    SchemaUtils.requireDistinct(this, "output columns", added)
    val detection = schema($(detectionsCol)).dataType.asInstanceOf[ArrayType].elementType
    StructType(
      kept ++ Seq(
        StructField($(detectionIndexCol), IntegerType, nullable = $(keepUncropped)),
        StructField($(detectionCol), detection),
        StructField($(outputCol), ImageSchemaUtils.imageType),
        StructField($(errorCol), StringType)
      )
    )
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val schema = transformSchema(dataset.schema, logging = true)
    val chosen = CropChoice($(confidenceThreshold), $(categories).toSet, $(square))
    val encoded = dataset.schema($(inputCol)).dataType == BinaryType
    // The detections' fields as three arrays: Spark 4.0 cannot hand a UDF an array of rows.
    val crops =
      if (encoded)
        udf {
          (
              bytes: Array[Byte],
              confs: Seq[java.lang.Double],
              categories: Seq[String],
              boxes: Seq[Seq[java.lang.Double]]
          ) =>
            chosen.crops(
              Detected(confs, categories, boxes),
              ImageTransformer.decodeAndRun(Nil, None)(bytes, _),
              null
            )
        }
      else
        udf {
          (
              image: Row,
              confs: Seq[java.lang.Double],
              categories: Seq[String],
              boxes: Seq[Seq[java.lang.Double]]
          ) =>
            chosen.crops(
              Detected(confs, categories, boxes),
              ImageTransformer.run(Nil)(image, _),
              if (image == null) null else image.getString(0)
            )
        }
    val tmp = s"__crop_$uid"
    val detections = col(SchemaUtils.quoted($(detectionsCol)))
    val exploded = dataset
      .toDF()
      .withColumn(
        tmp,
        (if ($(keepUncropped)) explode_outer _ else explode _) (
          crops.asNondeterministic()(
            col(SchemaUtils.quoted($(inputCol))),
            detections.getField("conf"),
            detections.getField("category"),
            detections.getField("bbox")
          )
        )
      )
    val index = col(s"$tmp.index")
    exploded.select(schema.fields.toIndexedSeq.map { f =>
      val value = f.name match {
        case n if n == $(detectionIndexCol) => index
        case n if n == $(detectionCol) => col(SchemaUtils.quoted($(detectionsCol)))(index)
        case n if n == $(outputCol) => col(s"$tmp.crop")
        case n if n == $(errorCol) => col(s"$tmp.error")
        case n => col(SchemaUtils.quoted(n))
      }
      value.as(f.name)
    }: _*)
  }

  override def copy(extra: ParamMap): CropDetections = defaultCopy(extra)
}

/** One crop: the detection's index, the crop (null when the parent cannot be read) and why not. */
final case class CropResult(index: Int, crop: ImageStruct, error: String)

/** An image's detections, field by field (index i of each is detection i). Values are boxed: a
  * detection, its conf or a value of its bbox may be null, which makes that detection not chosen (a
  * null conf) or its row's error (a bbox), never the job's failure.
  */
final case class Detected(
    confs: Seq[java.lang.Double],
    categories: Seq[String],
    boxes: Seq[Seq[java.lang.Double]]
)

/** Which detections are cropped, and how. */
final case class CropChoice(threshold: Double, categories: Set[String], square: Boolean) {

  private def chosen(d: Detected): Seq[Int] =
    if (d.confs == null) Nil
    else
      d.confs.indices.filter { i =>
        val conf = d.confs(i)
        conf != null && conf >= threshold && (categories.isEmpty || categories(d.categories(i)))
      }

  /** The crops of an image's chosen detections; `withImage` hands the image to a function and
    * releases it after.
    */
  def crops(
      detections: Detected,
      withImage: (Image => Seq[CropResult]) => Seq[CropResult],
      origin: String
  ): Seq[CropResult] = {
    val wanted = chosen(detections)
    if (wanted.isEmpty) Nil
    else
      try
        withImage { image =>
          wanted.map { i =>
            val result = RowResults.attempt(crop(image, detections.boxes(i)))
            val mat = result.value
            try
              CropResult(
                i,
                if (mat == null) null else ImageSchemaUtils.toStruct(mat, origin),
                result.error
              )
            finally if (mat != null) mat.release()
          }
        }
      catch {
        case e: Exception =>
          val why = RowResults.describe(e)
          wanted.map(i => CropResult(i, null, why))
      }
  }

  /** The crop of `image` at `bbox` ([x_min, y_min, width, height] as fractions), a new Mat. */
  private[detection] def crop(image: Image, bbox: Seq[java.lang.Double]): Mat = {
    if (bbox == null || bbox.length != 4)
      throw new IllegalArgumentException(
        DetectionMessages.BoxSize("count" -> Option(bbox).map(_.length))
      )
    if (bbox.contains(null))
      throw new IllegalArgumentException(DetectionMessages.BoxNull("box" -> bbox.mkString(", ")))
    val b = bbox.map(_.doubleValue)
    val (imageH, imageW) = (image.mat.rows(), image.mat.cols())
    var x = math.min(math.max((b(0) * imageW).toInt, 0), imageW - 1)
    var y = math.min(math.max((b(1) * imageH).toInt, 0), imageH - 1)
    var w = math.min((b(2) * imageW).toInt, imageW - x)
    var h = math.min((b(3) * imageH).toInt, imageH - y)
    if (w <= 0 || h <= 0)
      throw new IllegalArgumentException(
        DetectionMessages
          .BoxEmpty("box" -> bbox.mkString(", "), "width" -> imageW, "height" -> imageH)
      )
    val side = math.max(w, h)
    if (square) {
      x = math.max(0, math.min(x - (side - w) / 2, imageW - math.min(side, imageW)))
      y = math.max(0, math.min(y - (side - h) / 2, imageH - math.min(side, imageH)))
      w = math.min(side, imageW)
      h = math.min(side, imageH)
    }
    val region = image.mat.submat(new Rect(x, y, w, h))
    try {
      if (!square || (w == side && h == side)) region.clone()
      else {
        val out = new Mat()
        val (top, left) = ((side - h) / 2, (side - w) / 2)
        Core.copyMakeBorder(
          region,
          out,
          top,
          side - h - top,
          left,
          side - w - left,
          Core.BORDER_CONSTANT,
          new Scalar(0, 0, 0, 0)
        )
        out
      }
    } finally region.release()
  }
}

object CropDetections extends StageReadable[CropDetections] {

  /** Whether `dataType` is an array of structs with the fields of a detection. */
  def isDetections(dataType: DataType): Boolean = dataType match {
    case ArrayType(s: StructType, _) =>
      Seq("category" -> StringType, "conf" -> DoubleType, "bbox" -> ArrayType(DoubleType))
        .forall { case (name, t) =>
          s.fieldNames.contains(name) && (s(name).dataType match {
            case ArrayType(e, _) => t.isInstanceOf[ArrayType] && e == DoubleType
            case other => other == t
          })
        }
    case _ => false
  }

}
