package mmlspark.train

import mmlspark.contracts.{HasInputCols, HasLabelCol, SchemaUtils, StageParam}
import org.apache.spark.internal.Logging
import org.apache.spark.ml.{PipelineModel, PipelineStage, Transformer}
import org.apache.spark.ml.param.{Param, ParamMap, Params}
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DataType, StructType}

/** Params of the train estimators and the models they fit. */
private[train] trait TrainParams extends Params with HasLabelCol with HasInputCols {

  final val model: StageParam = new StageParam(
    this,
    "model",
    "the Spark ML learner to train (for TrainClassifier a classifier such as " +
      "LogisticRegression, for TrainRegressor a regressor); its features, label and prediction " +
      "columns are set by this stage. Holds a stage: not settable over Spark Connect"
  )

  setDefault(labelCol -> "label")

  def getModel: PipelineStage = $(model)
  def setModel(value: PipelineStage): this.type = set(model, value)

  /** The columns to featurize: `inputCols`, or every column but the label. */
  protected def featureColumns(schema: StructType): Seq[String] =
    get(inputCols).map(_.toSeq).getOrElse(schema.fieldNames.toSeq.filterNot(_ == $(labelCol)))

  /** Helper columns start with this; they never reach the output. */
  protected def helperPrefix: String = s"__train_${uid}_"
}

/** What the fitted train models share: the featurization and the fitted learner. */
private[train] trait TrainedParams extends TrainParams {

  final val featurization: StageParam = new StageParam(
    this,
    "featurization",
    "the fitted featurization (a PipelineModel turning the input columns into the learner's features)"
  )

  final val labelType: Param[String] = new Param[String](
    this,
    "labelType",
    "the Spark SQL type of the label column at training, as in a DDL string (e.g. 'string', 'double')",
    (t: String) => scala.util.Try(DataType.fromDDL(t)).isSuccess
  )

  def getFeaturization: PipelineStage = $(featurization)
  def setFeaturization(value: PipelineStage): this.type = set(featurization, value)
  def getLabelType: String = $(labelType)
  def setLabelType(value: String): this.type = set(labelType, value)

  protected def inner: Transformer = $(model) match {
    case t: Transformer => t
    case other =>
      throw new IllegalArgumentException(
        s"${SchemaUtils.stageName(this)}: param 'model' must hold a fitted model but holds ${other.getClass.getName}"
      )
  }

  protected def featuresCol: String = helperPrefix + "features"
  protected def indexCol: String = helperPrefix + "prediction"

  /** Checks that the input columns are there, then featurizes and runs the learner. */
  protected def score(dataset: Dataset[_]): DataFrame = {
    val schema = dataset.schema
    Featurization.check(this, schema, $(inputCols).toSeq)
    Featurization(
      $(featurization).asInstanceOf[PipelineModel],
      dataset.toDF(),
      helperPrefix,
      featuresCol
    )
      .transform(inner.transform)
  }

  protected def copyInto[M <: TrainedParams](copied: M, extra: ParamMap): M = {
    get(model).foreach(m => copied.set(copied.model, m.copy(extra)))
    get(featurization).foreach(f => copied.set(copied.featurization, f.copy(extra)))
    copied
  }
}

private[train] object Training extends Logging {

  /** The rows of `dataset` that have a label; the others are dropped, their count logged. */
  def labelled(stage: Params, dataset: Dataset[_], labelCol: String): DataFrame = {
    val label = col(SchemaUtils.quoted(labelCol))
    val unlabelled = dataset.filter(label.isNull).count()
    if (unlabelled > 0)
      logWarning(
        s"${SchemaUtils.stageName(stage)}: dropped $unlabelled rows whose label '$labelCol' is null"
      )
    dataset.toDF().filter(label.isNotNull)
  }

  /** A copy of the learner `stage` reading `features` and `label`, writing its prediction to
    * `prediction`.
    */
  def configure(
      owner: Params,
      stage: PipelineStage,
      features: String,
      label: String,
      prediction: String
  ): PipelineStage = {
    val learner = stage.copy(ParamMap.empty)
    Seq("featuresCol" -> features, "labelCol" -> label, "predictionCol" -> prediction).foreach {
      case (name, value) =>
        SchemaUtils.require(
          owner,
          learner.hasParam(name),
          s"the learner ${learner.getClass.getName} has no param '$name'; it must be a Spark ML Predictor"
        )
        learner.set(learner.getParam(name), value)
    }
    learner
  }
}
