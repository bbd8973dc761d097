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
import org.apache.spark.ml.linalg.SQLDataTypes
import org.apache.spark.ml.param.{IntParam, ParamMap, ParamValidators}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.sql.types.{BinaryType, StructType}
import org.opencv.core.{Mat, Size}
import org.opencv.imgproc.Imgproc

/** Decodes encoded image bytes, optionally resizes them to `height` x `width`, and unrolls them
  * into a vector like [[UnrollImage]], in one step with no image column in between. A row that
  * cannot be decoded gets a null vector and an error message.
  */
final class UnrollBinaryImage(override val uid: String)
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with HasErrorCol
    with HasDecodeParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("UnrollBinaryImage"))

  final val height: IntParam =
    new IntParam(
      this,
      "height",
      "height to resize to before unrolling (0: keep the size)",
      ParamValidators.gtEq(0)
    )

  final val width: IntParam =
    new IntParam(
      this,
      "width",
      "width to resize to before unrolling (0: keep the size)",
      ParamValidators.gtEq(0)
    )

  setDefault(
    inputCol -> "content",
    outputCol -> "unrolled",
    errorCol -> "error",
    height -> 0,
    width -> 0
  )

  def getHeight: Int = $(height)

  def setHeight(value: Int): this.type = set(height, value)

  def getWidth: Int = $(width)

  def setWidth(value: Int): this.type = set(width, value)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), "binary")(_ == BinaryType)
    SchemaUtils.require(
      this,
      ($(height) == 0) == ($(width) == 0),
      "height and width must both be 0 or both be positive"
    )
    RowResults.schema(this, schema, $(outputCol), SQLDataTypes.VectorType, $(errorCol))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val (mode, orientation, reduce, h, w) =
      ($(colorMode), $(applyOrientation), $(reduceFactor), $(height), $(width))
    val (minH, minW) = ($(minHeight), $(minWidth))
    val unroll = udf { (bytes: Array[Byte]) =>
      try {
        val decoded = ImageCodec.decode(bytes, mode, orientation, reduce, minH, minW)
        val sized =
          if (h == 0) decoded
          else {
            val out = new Mat()
            try Imgproc.resize(decoded, out, new Size(w, h))
            finally decoded.release()
            out
          }
        try UnrolledImage(Unrolling.toVector(sized), null)
        finally sized.release()
      } catch {
        case NonFatal(e) => UnrolledImage(null, RowResults.describe(e))
      }
    }.asNondeterministic()
    RowResults.expand(
      dataset,
      this,
      unroll(col(SchemaUtils.quoted($(inputCol)))),
      "vector",
      $(outputCol),
      $(errorCol)
    )
  }

  override def copy(extra: ParamMap): UnrollBinaryImage = defaultCopy(extra)
}

object UnrollBinaryImage extends StageReadable[UnrollBinaryImage]
