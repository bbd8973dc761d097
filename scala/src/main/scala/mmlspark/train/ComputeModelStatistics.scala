package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.mllib.evaluation.{BinaryClassificationMetrics, RegressionMetrics}
import org.apache.spark.sql.{DataFrame, Dataset, Row}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._

/** Scores a scored DataFrame (the output of a trained model, ours or Spark's) and returns one row
  * of metrics.
  *
  * Classification: `accuracy`; macro-averaged `precision`, `recall` and `f1` with their per-class
  * arrays (`precision_per_class`, ...) for the classes in `labels`; `AUC` for two classes when a
  * probability or rawPrediction column is present (score of the second class in `labels`, else
  * null); `confusion_matrix`, rows the true and columns the predicted class, in the order of
  * `labels`: the classes the prediction column's metadata names (a TrainedClassifierModel records
  * its training order), then any other seen, sorted. Regression: `mean_squared_error`,
  * `root_mean_squared_error`, `r2`, `mean_absolute_error`. Rows with a null label or prediction are
  * left out. The label, prediction and probability columns are found from a trained model's score
  * metadata when their params are not set (see [[MetricParams]]).
  */
final class ComputeModelStatistics(override val uid: String)
    extends Transformer
    with MetricParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("ComputeModelStatistics"))

  override def transformSchema(schema: StructType): StructType =
    if (isClassification(schema)) ComputeModelStatistics.classificationSchema
    else ComputeModelStatistics.regressionSchema

  override def transform(dataset: Dataset[_]): DataFrame = {
    val schema = transformSchema(dataset.schema, logging = true)
    val spark = dataset.sparkSession
    val row =
      if (schema == ComputeModelStatistics.regressionSchema) regression(dataset.toDF())
      else classification(dataset.toDF())
    spark.createDataFrame(java.util.Collections.singletonList(row), schema)
  }

  private def complete(df: DataFrame): DataFrame =
    df.na.drop(Seq(labelColumn(df.schema), predictionColumn(df.schema)))

  private def regression(df: DataFrame): Row = {
    val pairs = complete(df)
      .select(
        col(SchemaUtils.quoted(predictionColumn(df.schema))).cast(DoubleType),
        col(SchemaUtils.quoted(labelColumn(df.schema))).cast(DoubleType)
      )
      .rdd
      .map(r => (r.getDouble(0), r.getDouble(1)))
    SchemaUtils.require(this, !pairs.isEmpty(), TrainMessages.NoScoredRows())
    val m = new RegressionMetrics(pairs)
    Row(m.meanSquaredError, m.rootMeanSquaredError, m.r2, m.meanAbsoluteError)
  }

  /** The classes, in metric order, and the confusion counts per (true, predicted) class. */
  private[train] def confusion(df: DataFrame): (Array[String], Array[Array[Long]]) = {
    val data = complete(df)
    val (label, prediction) = asClasses(data)
    val counts = data.groupBy(label.as("l"), prediction.as("p")).count().collect()
    SchemaUtils.require(this, counts.nonEmpty, TrainMessages.NoScoredRows())
    val numeric = Seq(labelColumn(df.schema), predictionColumn(df.schema)).forall(c =>
      df.schema(c).dataType.isInstanceOf[NumericType]
    )
    val declared = MetricParams
      .classes(df.schema(predictionColumn(df.schema)).metadata)
      .map(_.map(c => if (numeric) c.toDouble.toString else c))
      .getOrElse(Array.empty[String])
    val seen =
      counts.flatMap(r => Seq(r.getString(0), r.getString(1))).distinct.filterNot(declared.contains)
    val sorted = if (numeric) seen.sortBy(_.toDouble) else seen.sorted
    val levels = declared ++ sorted
    val index = levels.zipWithIndex.toMap
    val matrix = Array.fill(levels.length, levels.length)(0L)
    counts.foreach(r => matrix(index(r.getString(0)))(index(r.getString(1))) += r.getLong(2))
    (levels, matrix)
  }

  private def classification(df: DataFrame): Row = {
    val (levels, matrix) = confusion(df)
    val k = levels.length
    val total = matrix.map(_.sum).sum.toDouble
    def ratio(a: Double, b: Double) = if (b == 0) 0.0 else a / b
    val precision =
      Array.tabulate(k)(i => ratio(matrix(i)(i).toDouble, matrix.map(_(i)).sum.toDouble))
    val recall = Array.tabulate(k)(i => ratio(matrix(i)(i).toDouble, matrix(i).sum.toDouble))
    val f1 = Array.tabulate(k)(i => ratio(2 * precision(i) * recall(i), precision(i) + recall(i)))
    val accuracy = (0 until k).map(i => matrix(i)(i)).sum / total
    val auc = if (k == 2) roc(df, levels(1)).map(_.areaUnderROC()) else None
    Row(
      accuracy,
      precision.sum / k,
      recall.sum / k,
      f1.sum / k,
      auc.map(Double.box).orNull,
      levels.toSeq,
      precision.toSeq,
      recall.toSeq,
      f1.toSeq,
      matrix.map(_.toSeq).toSeq
    )
  }

  /** The ROC of the class `positive` against the others, from the second score of each row. */
  private[train] def roc(df: DataFrame, positive: String): Option[BinaryClassificationMetrics] =
    scoreColumn(df.schema).map { scores =>
      val data = complete(df).filter(col(SchemaUtils.quoted(scores)).isNotNull)
      val (label, _) = asClasses(data)
      val points = data
        .select(col(SchemaUtils.quoted(scores)), label)
        .rdd
        .map(r => (r.getAs[Vector](0)(1), if (r.getString(1) == positive) 1.0 else 0.0))
      new BinaryClassificationMetrics(points)
    }

  /** The ROC curve (false positive rate, true positive rate) points of a two-class scored
    * DataFrame, from (0, 0) to (1, 1); empty for other tasks or without class scores.
    */
  def rocCurve(df: DataFrame): Seq[(Double, Double)] = {
    val (levels, _) = confusion(df)
    if (levels.length != 2) Nil else roc(df, levels(1)).map(_.roc().collect().toSeq).getOrElse(Nil)
  }

  override def copy(extra: ParamMap): ComputeModelStatistics = defaultCopy(extra)
}

object ComputeModelStatistics extends StageReadable[ComputeModelStatistics] {

  val classificationSchema: StructType = StructType(
    Seq("accuracy", "precision", "recall", "f1", "AUC").map(StructField(_, DoubleType)) ++
      Seq(
        StructField("labels", ArrayType(StringType, containsNull = false)),
        StructField("precision_per_class", ArrayType(DoubleType, containsNull = false)),
        StructField("recall_per_class", ArrayType(DoubleType, containsNull = false)),
        StructField("f1_per_class", ArrayType(DoubleType, containsNull = false)),
        StructField(
          "confusion_matrix",
          ArrayType(ArrayType(LongType, containsNull = false), containsNull = false)
        )
      )
  )

  val regressionSchema: StructType = StructType(
    Seq("mean_squared_error", "root_mean_squared_error", "r2", "mean_absolute_error").map(
      StructField(_, DoubleType)
    )
  )
}
