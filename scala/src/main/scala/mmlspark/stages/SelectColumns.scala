package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Keeps the named columns, in the order given, and drops every other column. */
final class SelectColumns(override val uid: String)
    extends Transformer
    with ColumnListParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("SelectColumns"))

  override protected def colsPurpose: String = "to keep, in output order"

  override def transformSchema(schema: StructType): StructType = StructType(requireCols(schema))

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    dataset.select($(cols).map(c => dataset.col(SchemaUtils.quoted(c))).toIndexedSeq: _*)
  }

  override def copy(extra: ParamMap): SelectColumns = defaultCopy(extra)
}

object SelectColumns extends StageReadable[SelectColumns]
