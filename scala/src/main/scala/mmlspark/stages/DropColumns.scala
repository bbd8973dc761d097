package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.{ParamMap, StringArrayParam}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Drops the named columns; every named column must exist. */
final class DropColumns(override val uid: String) extends Transformer with StageWritable {

  def this() = this(Identifiable.randomUID("DropColumns"))

  final val cols: StringArrayParam = new StringArrayParam(
    this,
    "cols",
    "names of the columns to drop (at least one, no repeats)",
    (names: Array[String]) => names.nonEmpty && names.distinct.length == names.length
  )

  def getCols: Array[String] = $(cols)

  def setCols(value: Array[String]): this.type = set(cols, value)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(cols), "param 'cols' must be set")
    $(cols).foreach(c => SchemaUtils.requireColumn(this, schema, c))
    StructType(schema.fields.filterNot(f => $(cols).contains(f.name)))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    dataset.drop($(cols).toIndexedSeq: _*)
  }

  override def copy(extra: ParamMap): DropColumns = defaultCopy(extra)
}

object DropColumns extends StageReadable[DropColumns]
