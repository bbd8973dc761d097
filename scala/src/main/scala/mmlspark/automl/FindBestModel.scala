package mmlspark.automl

import mmlspark.contracts.{
  HasLabelCol,
  HasPredictionCol,
  SchemaUtils,
  StageArrayParam,
  StageParams,
  StageReadable,
  StageWritable
}
import mmlspark.train.{ComputeModelStatistics, TrainMessages}
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.ml.{Estimator, Transformer}
import org.apache.spark.ml.param.{ParamMap, Params}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.types._

/** Params of [[FindBestModel]] and [[BestModel]]. */
private[automl] trait FindBestModelParams
    extends Params
    with FindBestModelParamsDecls
    with HasLabelCol
    with HasPredictionCol {

  setDefault(labelCol -> "label", evaluationMetric -> "accuracy", predictionCol -> "prediction")

  /** The statistics stage models are scored with: the label and prediction columns as set here,
    * else found from each model's score metadata (the defaults when it has none).
    */
  protected def statistics: ComputeModelStatistics = {
    val stats = new ComputeModelStatistics()
      .setEvaluationMetric(FindBestModel.metrics($(evaluationMetric))._1)
    if (isSet(labelCol)) stats.setLabelCol($(labelCol))
    if (isSet(predictionCol)) stats.setPredictionCol($(predictionCol))
    stats
  }
}

/** Scores each of several fitted models on a dataset with [[ComputeModelStatistics]] and keeps the
  * best by `evaluationMetric`; the [[BestModel]] transforms like it and holds every model's metrics
  * (and, for two classes, the best model's ROC curve).
  */
final class FindBestModel(override val uid: String)
    extends Estimator[BestModel]
    with FindBestModelDecls
    with Logging {

  def this() = this(Identifiable.randomUID("FindBestModel"))

  private def candidates: Seq[Transformer] = {
    SchemaUtils.require(
      this,
      isDefined(models),
      TrainMessages.NoModels()
    )
    $(models).toSeq.map(SchemaUtils.requireTransformer(this, "models", _))
  }

  override def transformSchema(schema: StructType): StructType = {
    val outputs = candidates.map(_.transformSchema(schema))
    outputs.foreach(statistics.transformSchema)
    outputs.head
  }

  override def fit(dataset: Dataset[_]): BestModel = {
    transformSchema(dataset.schema, logging = true)
    val (task, higherIsBetter) = FindBestModel.metrics($(evaluationMetric))
    val scored = candidates.map { model =>
      val row = statistics.transform(model.transform(dataset)).head()
      val value = row.get(row.fieldIndex($(evaluationMetric)))
      SchemaUtils.require(
        this,
        value != null,
        TrainMessages.UndefinedMetric("metric" -> $(evaluationMetric), "model" -> model.uid)
      )
      (model, row, value.asInstanceOf[Double])
    }
    val best = if (higherIsBetter) scored.maxBy(_._3) else scored.minBy(_._3)
    logInfo(
      s"${SchemaUtils.stageName(this)}: best by ${$(evaluationMetric)} is ${best._1.uid} (${best._3})"
    )
    val all = scored.map { case (model, row, value) =>
      Row.fromSeq(Seq(model.uid, model.getClass.getName, value) ++ row.toSeq)
    }
    val schema = StructType(
      Seq(
        StructField("model_uid", StringType),
        StructField("model_class", StringType),
        StructField($(evaluationMetric) + "_rank_value", DoubleType)
      ) ++ (if (task == "classification") ComputeModelStatistics.classificationSchema
            else ComputeModelStatistics.regressionSchema).fields
    )
    val roc = if (task == "classification") statistics.rocCurve(best._1.transform(dataset)) else Nil
    copyValues(new BestModel(uid))
      .setBestModel(best._1)
      .setMetrics(all, schema, roc)
      .setParent(this)
  }

  override def copy(extra: ParamMap): FindBestModel =
    StageParams.copyStages(this, defaultCopy[FindBestModel](extra), extra)
}

object FindBestModel extends StageReadable[FindBestModel] {

  /** Each metric: the task it belongs to, and whether higher is better. */
  val metrics: Map[String, (String, Boolean)] = Map(
    "accuracy" -> ("classification", true),
    "precision" -> ("classification", true),
    "recall" -> ("classification", true),
    "f1" -> ("classification", true),
    "AUC" -> ("classification", true),
    "mean_squared_error" -> ("regression", false),
    "root_mean_squared_error" -> ("regression", false),
    "r2" -> ("regression", true),
    "mean_absolute_error" -> ("regression", false)
  )
}
