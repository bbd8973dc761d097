package mmlspark.image

import mmlspark.contracts.{ColumnKind, RowResults, RowwiseTransformer, StageReadable, StageWritable}
import mmlspark.pixels.{ImageSchemaUtils, RowMessages}
import org.apache.spark.ml.linalg.{SQLDataTypes, Vector}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, Dataset, Row}
import org.apache.spark.sql.types.DataType

/** Turns each image into a dense vector of its samples in CHW order (channels in the image's own
  * order: BGR for color images), values exactly as stored (0-255 for 8-bit images). A null or
  * malformed image gives a null vector and an error message.
  */
final class UnrollImage(override val uid: String) extends RowwiseTransformer with StageWritable {

  def this() = this(Identifiable.randomUID("UnrollImage"))

  setDefault(inputCol -> "image", outputCol -> "unrolled", errorCol -> "unrollError")

  override protected def inputKind: ColumnKind = ImageSchemaUtils.ImageColumn

  override protected def outputDataType: DataType = SQLDataTypes.VectorType

  override protected def rowResults(dataset: Dataset[_], input: Column): Column =
    RowResults
      .udf1 { (row: Row) =>
        if (row == null) throw new IllegalArgumentException(RowMessages.NoImage())
        val mat = ImageSchemaUtils.toMat(row)
        try Unrolling.toVector(mat): Vector
        finally mat.release()
      }
      .apply(input)

  override def copy(extra: ParamMap): UnrollImage = defaultCopy(extra)
}

object UnrollImage extends StageReadable[UnrollImage]
