package mmlspark.train

import mmlspark.contracts.{HasFeaturesCol, HasInputCols, HasLabelCol, SchemaUtils}
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.ml.{Estimator, PipelineModel, PipelineStage, Transformer}
import org.apache.spark.ml.param.{
  IntParam,
  Param,
  ParamMap,
  ParamValidators,
  Params,
  StringArrayParam
}
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DoubleType, StructType}

/** Params of the train estimators and the models they fit. */
private[train] trait TrainParams
    extends Params
    with TrainParamsDecls
    with HasLabelCol
    with HasInputCols
    with HasFeaturesCol {

  setDefault(labelCol -> "label", numFeatures -> (1 << 18))

  /** The assembled features column: `featuresCol` when set (then kept in the output), else a helper
    * column.
    */
  protected def featuresColumn: String = get(featuresCol).getOrElse(helperPrefix + "features")

  /** The columns to featurize: `inputCols`, or every column but the label. */
  protected def featureColumns(schema: StructType): Seq[String] =
    get(inputCols).map(_.toSeq).getOrElse(schema.fieldNames.toSeq.filterNot(_ == $(labelCol)))

  /** Helper columns start with this; they never reach the output. */
  protected def helperPrefix: String = s"__train_${uid}_"

  /** Fits the featurization and the learner on `data` (the labelled rows of `dataset`), the
    * learner's label being `label` as a double, and gives `trained` (a new model of this stage's
    * uid) this stage's values and all it needs to score.
    */
  protected def fitInto[M <: TrainedParams](
      dataset: Dataset[_],
      data: DataFrame,
      label: Column,
      labelType: String,
      trained: M
  ): M = {
    val columns = featureColumns(dataset.schema)
    val features = featuresColumn
    val labelColumn = helperPrefix + "label"
    val (featurization, choice) = Training.featurize(this, data, columns, features, helperPrefix)
    val prepared = Featurization(featurization, data, helperPrefix, features)
      .withColumn(labelColumn, label.cast(DoubleType))
    val learner =
      Training.configure(this, $(model), features, labelColumn, helperPrefix + "prediction")
    val fitted = learner.asInstanceOf[Estimator[_]].fit(prepared)
    copyValues(trained)
      .setInputCols(columns.toArray)
      .setLabelType(labelType)
      .setFeaturization(featurization)
      .setTextCols(choice.text.toArray)
      .setCategoricalCols(choice.categorical.toArray)
      .setModel(fitted.asInstanceOf[PipelineStage])
  }
}

/** What the fitted train models share: the featurization and the fitted learner. */
private[train] trait TrainedParams extends TrainParams with TrainedParamsDecls {

  protected def inner: Transformer = SchemaUtils.requireTransformer(this, "model", $(model))

  protected def indexCol: String = helperPrefix + "prediction"

  /** Drops the work columns of [[score]]: the learner's raw prediction, and the assembled features
    * unless `featuresCol` keeps them.
    */
  protected def dropWorkColumns(scored: DataFrame): DataFrame =
    scored.drop(Seq(indexCol) ++ (if (isDefined(featuresCol)) Nil else Seq(featuresColumn)): _*)

  /** Checks that the input columns are there, then featurizes and runs the learner. */
  protected def score(dataset: Dataset[_]): DataFrame = {
    val schema = dataset.schema
    Featurization.check(this, schema, $(inputCols).toSeq)
    Featurization(
      $(featurization).asInstanceOf[PipelineModel],
      dataset.toDF(),
      helperPrefix,
      featuresColumn
    )
      .transform(inner.transform)
  }

}

private[train] object Training extends Logging {

  /** Fits the featurization of `columns` for `stage` into its features column. */
  def featurize(
      stage: TrainParams,
      data: DataFrame,
      columns: Seq[String],
      features: String,
      prefix: String
  ): (PipelineModel, Featurization.StringChoice) =
    Featurization.fit(
      stage,
      data,
      columns,
      features,
      prefix,
      stage.getOrDefault(stage.numFeatures),
      stage.get(stage.textCols).map(_.toSeq),
      stage.get(stage.categoricalCols).map(_.toSeq)
    )

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
          TrainMessages.NoLearnerParam("learner" -> learner.getClass.getName, "name" -> name)
        )
        learner.set(learner.getParam(name), value)
    }
    learner
  }
}
