package mmlspark.image

import mmlspark.contracts.{
  ColumnKind,
  RowResult,
  RowResults,
  RowwiseTransformer,
  SchemaUtils,
  StageReadable,
  StageWritable
}
import mmlspark.pixels.{
  ImageCodec,
  ImageFiles,
  ImageLimits,
  ImageSchemaUtils,
  ImageStruct,
  UndecodableImageException
}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.{col, lit}
import org.apache.spark.sql.types.{DataType, StringType, StructType}
import org.opencv.core.Mat

/** The row-wise stages that decode a binary column of encoded images (and, through
  * [[ImageDecoder]], the reader): their decoding params, input and decoding functions.
  */
trait HasDecodeParams extends RowwiseTransformer with HasDecodeParamsDecls {

  setDefault(
    inputCol -> "content",
    errorCol -> "error",
    colorMode -> "color",
    applyOrientation -> true,
    reduceFactor -> 1,
    minHeight -> 0,
    minWidth -> 0
  )

  override protected def inputKind: ColumnKind = ColumnKind.Binary

  /** A column expression reading the file at `path` (unless `listingError` says it cannot be used)
    * and decoding it into a [[RowResult]] of an image, on the executors: the encoded bytes live
    * only inside this one call.
    */
  private[image] def decodeFilesColumn(
      path: Column,
      listingError: Column,
      conf: org.apache.spark.broadcast.Broadcast[org.apache.spark.util.SerializableConfiguration]
  ): Column = {
    val decode = decoder
    RowResults
      .udf2 { (pathValue: String, error: String) =>
        if (error != null) throw new UndecodableImageException(error)
        val bytes = ImageFiles.readBytes(pathValue, conf.value, ImageLimits.maxFileBytes)
        HasDecodeParams.toStruct(decode(bytes), pathValue)
      }
      .apply(path, listingError)
  }

  /** A column expression decoding `bytes` (with `origin` as the image's origin) into a
    * [[RowResult]] of an image. Each row is decoded once, on the executors.
    */
  protected def decodeColumn(bytes: Column, origin: Column): Column = {
    val decode = decoder
    RowResults
      .udf2 { (data: Array[Byte], originValue: String) =>
        HasDecodeParams.toStruct(decode(data), originValue)
      }
      .apply(bytes, origin)
  }

  /** A serializable function decoding encoded bytes into a new Mat the caller releases, with this
    * stage's settings.
    */
  protected def decoder: Array[Byte] => Mat = {
    val (mode, orientation, reduce) = ($(colorMode), $(applyOrientation), $(reduceFactor))
    val (height, width) = ($(minHeight), $(minWidth))
    bytes => ImageCodec.decode(bytes, mode, orientation, reduce, height, width)
  }
}

object HasDecodeParams {

  /** `mat` copied into an image struct, and released. */
  private def toStruct(mat: Mat, origin: String): ImageStruct =
    try ImageSchemaUtils.toStruct(mat, origin)
    finally mat.release()
}

/** Decodes a binary column of encoded images (JPEG, PNG, BMP, TIFF, WebP, ...) into Spark's image
  * struct with OpenCV, on the executors. A row that cannot be decoded gets a null image and an
  * error message saying why; it is kept unless `dropInvalid` is true.
  */
final class ImageDecoder(override val uid: String)
    extends HasDecodeParams
    with ImageDecoderDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("ImageDecoder"))

  setDefault(
    outputCol -> "image",
    originCol -> "",
    dropInvalid -> false
  )

  override protected def outputDataType: DataType = ImageSchemaUtils.imageType

  override protected def checkSchema(schema: StructType): Unit =
    if ($(originCol).nonEmpty) {
      SchemaUtils.requireColumnType(this, schema, $(originCol), "string")(_ == StringType)
    }

  override protected def rowResults(dataset: Dataset[_], input: Column): Column = {
    val origin =
      if ($(originCol).isEmpty) lit(null).cast(StringType)
      else col(SchemaUtils.quoted($(originCol)))
    decodeColumn(input, origin)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val decoded = super.transform(dataset)
    if ($(dropInvalid)) decoded.filter(col(SchemaUtils.quoted($(outputCol))).isNotNull) else decoded
  }

  override def copy(extra: ParamMap): ImageDecoder = defaultCopy(extra)
}

object ImageDecoder extends StageReadable[ImageDecoder]
