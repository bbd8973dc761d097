package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.{ParamMap, StringArrayParam}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Keeps the named columns, in the order given, and drops every other column. */
final class SelectColumns(override val uid: String) extends Transformer with StageWritable {

  def this() = this(Identifiable.randomUID("SelectColumns"))

  final val cols: StringArrayParam = new StringArrayParam(
    this,
    "cols",
    "names of the columns to keep, in output order (at least one, no repeats)",
    (names: Array[String]) => names.nonEmpty && names.distinct.length == names.length
  )

  def getCols: Array[String] = $(cols)

  def setCols(value: Array[String]): this.type = set(cols, value)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(cols), "param 'cols' must be set")
    StructType($(cols).map(c => SchemaUtils.requireColumn(this, schema, c)))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    dataset.select($(cols).map(c => dataset.col(SchemaUtils.quoted(c))).toIndexedSeq: _*)
  }

  override def copy(extra: ParamMap): SelectColumns = defaultCopy(extra)
}

object SelectColumns extends StageReadable[SelectColumns]
