package mmlspark.image

import scala.util.control.NonFatal

import mmlspark.contracts.{
  HasErrorCol,
  HasInputCol,
  HasOutputCol,
  RowResults,
  SchemaUtils,
  StageReadable,
  StageWritable
}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.{BooleanParam, IntParam, Param, ParamMap, ParamValidators}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.{col, lit, udf}
import org.apache.spark.sql.types.{BinaryType, StringType, StructType}

/** The result of decoding one row: an image or the reason there is none. */
final case class DecodedImage(image: ImageStruct, error: String)

/** Params shared by the stages and the reader that decode encoded image bytes. */
trait HasDecodeParams extends org.apache.spark.ml.param.Params {

  final val colorMode: Param[String] = new Param[String](
    this,
    "colorMode",
    "how to decode: 'color' (8-bit BGR, default), 'grayscale' (8-bit) or 'unchanged' " +
      "(as stored: gray, BGR or BGRA, 8 or 16 bits)",
    ParamValidators.inArray(ImageCodec.ColorModes)
  )

  final val applyOrientation: BooleanParam = new BooleanParam(
    this,
    "applyOrientation",
    "rotate or flip JPEGs as their EXIF orientation tag says (default: true)"
  )

  final val reduceFactor: IntParam = new IntParam(
    this,
    "reduceFactor",
    "decode at 1/reduceFactor of the size, for very large images: 1 (default, full size), 2, 4 or 8",
    ParamValidators.inArray(Array(1, 2, 4, 8))
  )

  setDefault(colorMode -> "color", applyOrientation -> true, reduceFactor -> 1)

  def getColorMode: String = $(colorMode)

  def setColorMode(value: String): this.type = set(colorMode, value)

  def getApplyOrientation: Boolean = $(applyOrientation)

  def setApplyOrientation(value: Boolean): this.type = set(applyOrientation, value)

  def getReduceFactor: Int = $(reduceFactor)

  def setReduceFactor(value: Int): this.type = set(reduceFactor, value)

  /** A column expression decoding `bytes` (with `origin` as the image's origin) into a
    * [[DecodedImage]] struct. Each row is decoded once, on the executors.
    */
  protected def decodeColumn(bytes: Column, origin: Column): Column = {
    val (mode, orientation, reduce) = ($(colorMode), $(applyOrientation), $(reduceFactor))
    val decode = udf { (data: Array[Byte], originValue: String) =>
      try {
        val mat = ImageCodec.decode(data, mode, orientation, reduce)
        try DecodedImage(ImageSchemaUtils.toStruct(mat, originValue), null)
        finally mat.release()
      } catch {
        case NonFatal(e) => DecodedImage(null, RowResults.describe(e))
      }
    }.asNondeterministic() // keeps Spark from running the decode once per output field
    decode(bytes, origin)
  }
}

/** Decodes a binary column of encoded images (JPEG, PNG, BMP, TIFF, WebP, ...) into Spark's image
  * struct with OpenCV, on the executors. A row that cannot be decoded gets a null image and an
  * error message saying why; it is kept unless `dropInvalid` is true.
  */
final class ImageDecoder(override val uid: String)
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with HasErrorCol
    with HasDecodeParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("ImageDecoder"))

  final val originCol: Param[String] = new Param[String](
    this,
    "originCol",
    "string column copied into each image's origin field, such as the file path (default: '', none)"
  )

  final val dropInvalid: BooleanParam = new BooleanParam(
    this,
    "dropInvalid",
    "drop the rows that cannot be decoded instead of keeping them with a null image (default: false)"
  )

  setDefault(
    inputCol -> "content",
    outputCol -> "image",
    errorCol -> "error",
    originCol -> "",
    dropInvalid -> false
  )

  def getOriginCol: String = $(originCol)

  def setOriginCol(value: String): this.type = set(originCol, value)

  def getDropInvalid: Boolean = $(dropInvalid)

  def setDropInvalid(value: Boolean): this.type = set(dropInvalid, value)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), "binary")(_ == BinaryType)
    if ($(originCol).nonEmpty) {
      SchemaUtils.requireColumnType(this, schema, $(originCol), "string")(_ == StringType)
    }
    RowResults.schema(this, schema, $(outputCol), ImageSchemaUtils.imageType, $(errorCol))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val origin =
      if ($(originCol).isEmpty) lit(null).cast(StringType)
      else col(SchemaUtils.quoted($(originCol)))
    val decoded = RowResults.expand(
      dataset,
      this,
      decodeColumn(col(SchemaUtils.quoted($(inputCol))), origin),
      "image",
      $(outputCol),
      $(errorCol)
    )
    if ($(dropInvalid)) decoded.filter(col(SchemaUtils.quoted($(outputCol))).isNotNull) else decoded
  }

  override def copy(extra: ParamMap): ImageDecoder = defaultCopy(extra)
}

object ImageDecoder extends StageReadable[ImageDecoder]
