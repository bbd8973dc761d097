package mmlspark.featurize

import mmlspark.contracts.{HasInputCol, HasOutputCol, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Estimator
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{functions, Column, Dataset}
import org.apache.spark.sql.functions.isnan
import org.apache.spark.sql.types._

/** Shared by [[ValueIndexer]] and [[ValueIndexerModel]]. */
private[featurize] trait ValueIndexerParams extends HasInputCol with HasOutputCol {

  protected def indexedSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ValueIndexer.Indexable)(
      ValueIndexer.indexable
    )
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    schema.add(StructField($(outputCol), IntegerType, nullable = false))
  }
}

/** Learns the levels of `inputCol`, a string, boolean or numeric column: its distinct values in
  * ascending order (Spark's ordering). A missing value (null, or NaN in a floating-point column) is
  * no level; the model indexes it after the levels.
  */
final class ValueIndexer(override val uid: String)
    extends Estimator[ValueIndexerModel]
    with ValueIndexerParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("ValueIndexer"))

  override def transformSchema(schema: StructType): StructType = indexedSchema(schema)

  override def fit(dataset: Dataset[_]): ValueIndexerModel = {
    transformSchema(dataset.schema, logging = true)
    val field = dataset.schema($(inputCol))
    val column = dataset.col(SchemaUtils.quoted($(inputCol)))
    val present = functions.when(!ValueIndexer.missing(column, field.dataType), column)
    // One job: the distinct values, missing ones as a null after the levels.
    val rows = dataset
      .select(present.as("level"))
      .distinct()
      .orderBy(functions.col("level").asc_nulls_last)
      .select(functions.col("level").cast(StringType))
      .collect()
    val levels = rows.filterNot(_.isNullAt(0)).map(_.getString(0))
    val anyMissing = rows.exists(_.isNullAt(0))
    copyValues(
      new ValueIndexerModel(uid)
        .setLevels(levels)
        .setDataType(field.dataType.catalogString)
        .setHasNullLevel(anyMissing)
    ).setParent(this)
  }

  override def copy(extra: ParamMap): ValueIndexer = defaultCopy(extra)
}

object ValueIndexer extends StageReadable[ValueIndexer] {

  /** What an indexed column holds, as errors name it. */
  val Indexable = "a string, boolean or numeric type"

  def indexable(t: DataType): Boolean =
    t == StringType || t == BooleanType || t.isInstanceOf[NumericType]

  /** A missing value: null, or NaN in a floating-point column. */
  def missing(column: Column, dataType: DataType): Column = dataType match {
    case DoubleType | FloatType => column.isNull || isnan(column)
    case _ => column.isNull
  }

  /** The metadata key next to the nominal attribute that names the levels' Spark SQL type. */
  val ValueTypeKey = "mmlspark_value_type"
}
