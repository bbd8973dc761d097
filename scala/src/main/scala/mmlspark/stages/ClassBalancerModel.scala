package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.hadoop.fs.Path
import org.apache.spark.ml.Model
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row, SparkSession}
import org.apache.spark.sql.functions.broadcast
import org.apache.spark.sql.types.{DataType, DoubleType, StructField, StructType}

/** Appends `outputCol`, the weight of each row's class in `inputCol` as learned by
  * [[ClassBalancer]]. A class not seen when fitting gets a null weight; no row is dropped.
  *
  * @param labelType
  *   the Spark type of the label column the model was fitted on
  * @param labels
  *   the classes seen when fitting (null for the null class)
  * @param weights
  *   the weight of each class, in the order of `labels`
  */
final class ClassBalancerModel(
    override val uid: String,
    val labelType: DataType,
    val labels: Array[Any],
    val weights: Array[Double]
) extends Model[ClassBalancerModel]
    with ClassBalancerParams
    with StageWritable {

  require(labels.length == weights.length, "one weight per label")

  def this(uid: String) = this(uid, DoubleType, Array.empty[Any], Array.empty[Double])

  def this() = this(Identifiable.randomUID("ClassBalancerModel"))

  /** The weight table: columns `label` (the type of `inputCol`) and `weight`. */
  def weightTable(spark: SparkSession): DataFrame = {
    val schema = StructType(
      Seq(StructField("label", labelType), StructField("weight", DoubleType, nullable = false))
    )
    val rows = labels.zip(weights).map { case (l, w) => Row(l, w) }.toIndexedSeq
    spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), schema)
  }

  override def transformSchema(schema: StructType): StructType = weightedSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val input = dataset.col(SchemaUtils.quoted($(inputCol)))
    val table = weightTable(dataset.sparkSession)
      .withColumnRenamed("label", s"__label_$uid")
      .withColumnRenamed("weight", s"__weight_$uid")
    val right = if ($(broadcastJoin)) broadcast(table) else table
    dataset
      .join(right, input <=> table(s"__label_$uid"), "left")
      .drop(s"__label_$uid")
      .withColumnRenamed(s"__weight_$uid", $(outputCol))
  }

  override def saveData(path: String, spark: SparkSession): Unit =
    weightTable(spark).write.parquet(new Path(path, "data").toString)

  override def copy(extra: ParamMap): ClassBalancerModel =
    copyValues(new ClassBalancerModel(uid, labelType, labels, weights), extra).setParent(parent)
}

object ClassBalancerModel extends StageReadable[ClassBalancerModel] {
  override protected def create(
      uid: String,
      path: String,
      spark: SparkSession
  ): ClassBalancerModel = {
    val table = spark.read.parquet(new Path(path, "data").toString)
    val rows = table.collect()
    new ClassBalancerModel(
      uid,
      table.schema("label").dataType,
      rows.map(_.get(0)),
      rows.map(_.getDouble(1))
    )
  }
}
