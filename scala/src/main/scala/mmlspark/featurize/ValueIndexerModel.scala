package mmlspark.featurize

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Model
import org.apache.spark.ml.attribute.NominalAttribute
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{array, array_position, lit, when}
import org.apache.spark.sql.types.{DataType, IntegerType, Metadata, MetadataBuilder, StructType}

/** Appends `outputCol`, the index of each value of `inputCol` in `levels` (from 0). A missing value
  * (null, or NaN in a floating-point column) gets the index `levels.length`; a value not among the
  * levels gets `levels.length + 1` when fitting saw missing values (`hasNullLevel`), else
  * `levels.length`. The index column carries a nominal attribute naming the levels (so Spark's
  * IndexToString reads it) and their Spark SQL type (so [[IndexToValue]] gives back typed values).
  */
final class ValueIndexerModel(override val uid: String)
    extends Model[ValueIndexerModel]
    with ValueIndexerModelDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("ValueIndexerModel"))

  setDefault(levels -> Array.empty[String], dataType -> "string", hasNullLevel -> false)

  /** The levels' Spark SQL type. */
  def levelType: DataType = DataType.fromDDL($(dataType))

  override def transformSchema(schema: StructType): StructType = {
    val out = indexedSchema(schema)
    StructType(out.fields.init :+ out.fields.last.copy(metadata = indexMetadata))
  }

  /** The nominal attribute of the index column, with the levels' type beside it. */
  def indexMetadata: Metadata = {
    val attribute =
      NominalAttribute.defaultAttr.withName($(outputCol)).withValues($(levels)).toMetadata()
    new MetadataBuilder()
      .withMetadata(attribute)
      .putString(ValueIndexer.ValueTypeKey, $(dataType))
      .build()
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val field = dataset.schema($(inputCol))
    val column = dataset.col(SchemaUtils.quoted($(inputCol)))
    val n = $(levels).length
    val unseen = if ($(hasNullLevel)) n + 1 else n
    // array_position is 1-based, 0 where the value is no level.
    val position =
      if (n == 0) lit(0L)
      else array_position(array($(levels).map(l => lit(l).cast(field.dataType)): _*), column)
    val index = when(ValueIndexer.missing(column, field.dataType), lit(n))
      .when(position === 0, lit(unseen))
      .otherwise(position - 1)
      .cast(IntegerType)
    dataset.withColumn($(outputCol), index.as($(outputCol), indexMetadata))
  }

  override def copy(extra: ParamMap): ValueIndexerModel = defaultCopy(extra)
}

object ValueIndexerModel extends StageReadable[ValueIndexerModel]
