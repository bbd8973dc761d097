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
import org.apache.spark.ml.linalg.{SQLDataTypes, Vector}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row}
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.sql.types.StructType

final case class UnrolledImage(vector: Vector, error: String)

/** Turns each image into a dense vector of its samples in CHW order (channels in the image's own
  * order: BGR for color images), values exactly as stored (0-255 for 8-bit images). A null or
  * malformed image gives a null vector and an error message.
  */
final class UnrollImage(override val uid: String)
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with HasErrorCol
    with StageWritable {

  def this() = this(Identifiable.randomUID("UnrollImage"))

  setDefault(inputCol -> "image", outputCol -> "unrolled", errorCol -> "unrollError")

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), "an image struct")(
      ImageSchemaUtils.isImage
    )
    RowResults.schema(this, schema, $(outputCol), SQLDataTypes.VectorType, $(errorCol))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val unroll = udf { (row: Row) =>
      if (row == null) UnrolledImage(null, "no input image (null)")
      else
        try {
          val mat = ImageSchemaUtils.toMat(row)
          try UnrolledImage(Unrolling.toVector(mat), null)
          finally mat.release()
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

  override def copy(extra: ParamMap): UnrollImage = defaultCopy(extra)
}

object UnrollImage extends StageReadable[UnrollImage]
