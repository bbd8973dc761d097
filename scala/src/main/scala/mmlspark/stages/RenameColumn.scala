package mmlspark.stages

import mmlspark.contracts.{HasInputCol, HasOutputCol, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Renames column `inputCol` to `outputCol`, keeping its position, type and metadata. Renaming a
  * column to its own name changes nothing; an `outputCol` that names another existing column is
  * refused (Spark's rename would leave two columns of one name, which no later stage can tell
  * apart).
  */
final class RenameColumn(override val uid: String)
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with StageWritable {

  def this() = this(Identifiable.randomUID("RenameColumn"))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(inputCol) && isDefined(outputCol),
      StagesMessages.RenameParams()
    )
    SchemaUtils.requireColumn(this, schema, $(inputCol))
    if ($(outputCol) != $(inputCol)) SchemaUtils.requireAbsent(this, schema, $(outputCol))
    StructType(
      schema.fields.map(f => if (f.name == $(inputCol)) f.copy(name = $(outputCol)) else f)
    )
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    dataset.withColumnRenamed($(inputCol), $(outputCol))
  }

  override def copy(extra: ParamMap): RenameColumn = defaultCopy(extra)
}

object RenameColumn extends StageReadable[RenameColumn]
