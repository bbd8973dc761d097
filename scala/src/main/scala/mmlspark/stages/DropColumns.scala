package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Drops the named columns; a name that is no column of the input is passed over, as Spark's `drop`
  * does. An empty list drops nothing.
  */
final class DropColumns(override val uid: String)
    extends Transformer
    with ColumnListParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("DropColumns"))

  override protected def colsPurpose: String = "to drop"

  override protected def emptyAllowed: Boolean = true

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(cols), "param 'cols' must be set")
    StructType(schema.fields.filterNot(f => $(cols).contains(f.name)))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    dataset.drop($(cols).toIndexedSeq: _*)
  }

  override def copy(extra: ParamMap): DropColumns = defaultCopy(extra)
}

object DropColumns extends StageReadable[DropColumns]
