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
    "how to decode: 'color' (8-bit BGR), 'grayscale' (8-bit) or 'unchanged' " +
      "(as stored: gray, BGR or BGRA, 8 or 16 bits)",
    ParamValidators.inArray(ImageCodec.ColorModes)
  )

  final val applyOrientation: BooleanParam = new BooleanParam(
    this,
    "applyOrientation",
    "rotate or flip JPEGs as their EXIF orientation tag says"
  )

  final val reduceFactor: IntParam = new IntParam(
    this,
    "reduceFactor",
    "decode at 1/reduceFactor of the size, for very large images: 1 (full size), 2, 4 or 8",
    ParamValidators.inArray(Array(1, 2, 4, 8))
  )

  final val minHeight: IntParam = new IntParam(
    this,
    "minHeight",
    "with minWidth, when either is positive: decode JPEGs at the smallest of 1/8, 1/4, 1/2 and " +
      "full scale that still covers minHeight x minWidth, in place of reduceFactor (for stages " +
      "that resize to a smaller size anyway: much faster and smaller for large photos); other " +
      "formats are decoded at full size. 0 means no minimum",
    ParamValidators.gtEq(0)
  )

  final val minWidth: IntParam = new IntParam(
    this,
    "minWidth",
    "the width that a reduced JPEG decode must still cover; see minHeight. 0 means no minimum",
    ParamValidators.gtEq(0)
  )

  setDefault(
    colorMode -> "color",
    applyOrientation -> true,
    reduceFactor -> 1,
    minHeight -> 0,
    minWidth -> 0
  )

  def getColorMode: String = $(colorMode)

  def setColorMode(value: String): this.type = set(colorMode, value)

  def getApplyOrientation: Boolean = $(applyOrientation)

  def setApplyOrientation(value: Boolean): this.type = set(applyOrientation, value)

  def getReduceFactor: Int = $(reduceFactor)

  def setReduceFactor(value: Int): this.type = set(reduceFactor, value)

  def getMinHeight: Int = $(minHeight)

  def setMinHeight(value: Int): this.type = set(minHeight, value)

  def getMinWidth: Int = $(minWidth)

  def setMinWidth(value: Int): this.type = set(minWidth, value)

  /** A column expression reading the file at `path` (unless `listingError` says it cannot be used)
    * and decoding it into a [[DecodedImage]] struct, on the executors: the encoded bytes live only
    * inside this one call.
    */
  private[image] def decodeFilesColumn(
      path: Column,
      listingError: Column,
      conf: org.apache.spark.broadcast.Broadcast[org.apache.spark.util.SerializableConfiguration]
  ): Column = {
    val decode = decoder
    val read = udf { (pathValue: String, error: String) =>
      if (error != null) DecodedImage(null, error)
      else
        decode(
          () => ImageReader.readBytes(pathValue, conf.value, ImageLimits.maxFileBytes),
          pathValue
        )
    }.asNondeterministic()
    read(path, listingError)
  }

  /** A column expression decoding `bytes` (with `origin` as the image's origin) into a
    * [[DecodedImage]] struct. Each row is decoded once, on the executors.
    */
  protected def decodeColumn(bytes: Column, origin: Column): Column = {
    val decode = decoder
    udf((data: Array[Byte], originValue: String) => decode(() => data, originValue))
      .asNondeterministic() // keeps Spark from running the decode once per output field
      .apply(bytes, origin)
  }

  /** A serializable function from (encoded bytes, origin) to the decoded row, with this stage's
    * settings: any failure, running out of memory included, is the row's error.
    */
  private def decoder: (() => Array[Byte], String) => DecodedImage = {
    val (mode, orientation, reduce) = ($(colorMode), $(applyOrientation), $(reduceFactor))
    val (height, width) = ($(minHeight), $(minWidth))
    (bytes, origin) =>
      try {
        val mat = ImageCodec.decode(bytes(), mode, orientation, reduce, height, width)
        try DecodedImage(ImageSchemaUtils.toStruct(mat, origin), null)
        finally mat.release()
      } catch {
        case NonFatal(e) => DecodedImage(null, RowResults.describe(e))
        case e: OutOfMemoryError => DecodedImage(null, RowResults.describe(e))
      }
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
    "string column copied into each image's origin field, such as the file path ('': none)"
  )

  final val dropInvalid: BooleanParam = new BooleanParam(
    this,
    "dropInvalid",
    "drop the rows that cannot be decoded instead of keeping them with a null image"
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
