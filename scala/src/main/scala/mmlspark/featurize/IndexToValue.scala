package mmlspark.featurize

import mmlspark.contracts.{HasInputCol, HasOutputCol, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.attribute.{Attribute, NominalAttribute}
import org.apache.spark.ml.param.{ParamMap, Params}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{array, element_at, lit, when}
import org.apache.spark.sql.types.{DataType, IntegerType, StringType, StructField, StructType}

import scala.util.Try

/** Appends `outputCol`, the level each index of `inputCol` names, as the nominal attribute of the
  * index column lists them (the output of [[ValueIndexerModel]], or of Spark's StringIndexer), in
  * the levels' own type where the metadata names it (ValueIndexer's) and as strings otherwise. An
  * index that names no level (a missing or unseen value's) gives null.
  */
final class IndexToValue(override val uid: String)
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with StageWritable {

  def this() = this(Identifiable.randomUID("IndexToValue"))

  private def levels(schema: StructType): (Array[String], DataType) =
    IndexToValue.levels(this, schema, $(inputCol))

  override def transformSchema(schema: StructType): StructType = {
    val (_, valueType) = levels(schema)
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    schema.add(StructField($(outputCol), valueType, nullable = true))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val (values, valueType) = levels(dataset.schema)
    val index = dataset.col(SchemaUtils.quoted($(inputCol)))
    val value =
      if (values.isEmpty) lit(null).cast(valueType)
      else {
        val typed = array(values.map(v => lit(v).cast(valueType)): _*)
        // element_at is 1-based; an index outside the levels gives null.
        when(index >= 0 && index < values.length, element_at(typed, index.cast(IntegerType) + 1))
      }
    dataset.withColumn($(outputCol), value)
  }

  override def copy(extra: ParamMap): IndexToValue = defaultCopy(extra)
}

object IndexToValue extends StageReadable[IndexToValue] {

  /** The levels the nominal attribute of the index column `column` names, and their type; a failure
    * naming `stage` where the column is no number or carries no levels.
    */
  private[featurize] def levels(
      stage: Params,
      schema: StructType,
      column: String
  ): (Array[String], DataType) = {
    val field = SchemaUtils.requireColumnType(stage, schema, column, "a numeric type")(
      SchemaUtils.isNumeric
    )
    val values = Try(Attribute.fromStructField(field)).toOption.collect {
      case n: NominalAttribute if n.values.isDefined => n.values.get
    }
    SchemaUtils.require(stage, values.isDefined, FeaturizeMessages.NoLevels("column" -> column))
    val metadata = field.metadata
    val valueType =
      if (metadata.contains(ValueIndexer.ValueTypeKey))
        DataType.fromDDL(metadata.getString(ValueIndexer.ValueTypeKey))
      else StringType
    (values.get, valueType)
  }
}
