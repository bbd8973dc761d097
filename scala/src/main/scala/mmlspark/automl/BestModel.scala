package mmlspark.automl

import scala.jdk.CollectionConverters._

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.hadoop.fs.Path
import org.apache.spark.ml.{Model, Transformer}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row, SparkSession}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DoubleType, StructField, StructType}

/** The model [[FindBestModel]] chose: transforms like it, and keeps the metrics of every candidate
  * (`getAllModelMetrics`), the chosen one's (`getBestModelMetrics`) and, for two classes, the
  * chosen one's ROC curve (`getRocCurve`), all saved with the model.
  */
final class BestModel(override val uid: String) extends Model[BestModel] with BestModelDecls {

  def this() = this(Identifiable.randomUID("BestModel"))

  private var metricRows: Seq[Row] = Nil
  private var metricSchema: StructType = new StructType()
  private var roc: Seq[(Double, Double)] = Nil

  private[automl] def setMetrics(
      rows: Seq[Row],
      schema: StructType,
      curve: Seq[(Double, Double)]
  ): this.type = {
    metricRows = rows
    metricSchema = schema
    roc = curve
    this
  }

  private def spark = SparkSession.active

  /** One row per candidate model: its uid and class, the value it was ranked by, all metrics. */
  def getAllModelMetrics: DataFrame = spark.createDataFrame(metricRows.asJava, metricSchema)

  /** The row of [[getAllModelMetrics]] of the chosen model. */
  def getBestModelMetrics: DataFrame =
    getAllModelMetrics.filter(col("model_uid") === $(bestModel).uid)

  /** The chosen model's ROC curve on the data it was chosen on (two classes only; else empty). */
  def getRocCurve: DataFrame =
    spark.createDataFrame(roc.map(p => Row(p._1, p._2)).asJava, BestModel.rocSchema)

  private def model: Transformer = SchemaUtils.requireTransformer(this, "bestModel", $(bestModel))

  override def transformSchema(schema: StructType): StructType = model.transformSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    model.transform(dataset)
  }

  // One file each: Spark reads a table's files largest first, so rows split over several files
  // would come back out of order (the ROC curve's points, the candidates' order).
  override def saveData(path: String, spark: SparkSession): Unit = {
    spark
      .createDataFrame(metricRows.asJava, metricSchema)
      .coalesce(1)
      .write
      .parquet(new Path(path, "allModelMetrics").toString)
    getRocCurve.coalesce(1).write.parquet(new Path(path, "rocCurve").toString)
  }

  override def copy(extra: ParamMap): BestModel = {
    val copied = copyValues(new BestModel(uid), extra)
      .setParent(parent)
      .setMetrics(metricRows, metricSchema, roc)
    StageParams.copyStages(this, copied, extra)
  }
}

object BestModel extends StageReadable[BestModel] {

  val rocSchema: StructType =
    StructType(
      Seq(
        StructField("false_positive_rate", DoubleType),
        StructField("true_positive_rate", DoubleType)
      )
    )

  override protected def create(uid: String, path: String, spark: SparkSession): BestModel = {
    val metrics = spark.read.parquet(new Path(path, "allModelMetrics").toString)
    val curve = spark.read
      .parquet(new Path(path, "rocCurve").toString)
      .collect()
      .map(r => (r.getDouble(0), r.getDouble(1)))
      .sorted // both rates only grow along the curve (a curve saved in several files, too)
    new BestModel(uid).setMetrics(metrics.collect().toSeq, metrics.schema, curve.toSeq)
  }
}
