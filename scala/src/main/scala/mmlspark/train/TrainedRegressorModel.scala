package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Model
import org.apache.spark.ml.param.{ParamMap, Params}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DoubleType, StructField, StructType}

/** A regressor trained by [[TrainRegressor]]: featurizes like at training, runs the fitted learner
  * and adds its `prediction` (double).
  */
final class TrainedRegressorModel(override val uid: String)
    extends Model[TrainedRegressorModel]
    with TrainedParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("TrainedRegressorModel"))

  override def transformSchema(schema: StructType): StructType = {
    Featurization.check(this, schema, $(inputCols).toSeq)
    TrainedRegressorModel.outputSchema(this, schema)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    score(dataset).withColumn("prediction", col(indexCol)).drop(featuresCol, indexCol)
  }

  override def copy(extra: ParamMap): TrainedRegressorModel =
    copyInto(copyValues(new TrainedRegressorModel(uid), extra).setParent(parent), extra)
}

object TrainedRegressorModel extends StageReadable[TrainedRegressorModel] {
  private[train] def outputSchema(stage: Params, schema: StructType): StructType = {
    SchemaUtils.requireAbsent(stage, schema, "prediction")
    schema.add(StructField("prediction", DoubleType))
  }
}
