package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Estimator
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.regression.Regressor
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.Dataset
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{NumericType, StructType}

/** Trains any Spark ML regressor on a DataFrame of mixed columns, featurizing them like
  * [[TrainClassifier]]. The label must be numeric; rows whose label is null are dropped (their
  * count is logged).
  */
final class TrainRegressor(override val uid: String)
    extends Estimator[TrainedRegressorModel]
    with TrainParams {

  def this() = this(Identifiable.randomUID("TrainRegressor"))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(model), TrainMessages.NoLearner("kind" -> "regressor"))
    SchemaUtils.require(
      this,
      $(model).isInstanceOf[Regressor[_, _, _]],
      TrainMessages.WrongLearner("kind" -> "regressor", "held" -> $(model).getClass.getName)
    )
    SchemaUtils.requireColumnType(this, schema, $(labelCol), TrainMessages.NumericLabel())(
      _.isInstanceOf[NumericType]
    )
    Featurization.check(this, schema, featureColumns(schema))
    TrainedRegressorModel.outputSchema(this, schema, $(labelCol), get(featuresCol))
  }

  override def fit(dataset: Dataset[_]): TrainedRegressorModel = {
    transformSchema(dataset.schema, logging = true)
    val data = Training.labelled(this, dataset, $(labelCol))
    val label = col(SchemaUtils.quoted($(labelCol)))
    fitInto(dataset, data, label, "double", new TrainedRegressorModel(uid)).setParent(this)
  }

  override def copy(extra: ParamMap): TrainRegressor =
    StageParams.copyStages(this, defaultCopy[TrainRegressor](extra), extra)
}

object TrainRegressor extends StageReadable[TrainRegressor]
