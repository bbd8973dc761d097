package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Model
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.{ParamMap, Params}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DoubleType, StructField, StructType}

/** A regressor trained by [[TrainRegressor]]: featurizes like at training, runs the fitted learner
  * and adds its `prediction` (double), with score metadata ([[ScoreMetadata]]) naming the label
  * column. When `featuresCol` is set, the assembled feature vector is kept under that name.
  */
final class TrainedRegressorModel(override val uid: String)
    extends Model[TrainedRegressorModel]
    with TrainedParams {

  def this() = this(Identifiable.randomUID("TrainedRegressorModel"))

  override def transformSchema(schema: StructType): StructType = {
    Featurization.check(this, schema, $(inputCols).toSeq)
    TrainedRegressorModel.outputSchema(this, schema, $(labelCol), get(featuresCol))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val schema = transformSchema(dataset.schema, logging = true)
    dropWorkColumns(
      score(dataset)
        .withColumn("prediction", col(indexCol).as("prediction", schema("prediction").metadata))
    )
  }

  override def copy(extra: ParamMap): TrainedRegressorModel =
    StageParams.copyStages(
      this,
      copyValues(new TrainedRegressorModel(uid), extra).setParent(parent),
      extra
    )
}

object TrainedRegressorModel extends StageReadable[TrainedRegressorModel] {
  private[train] def outputSchema(
      stage: Params,
      schema: StructType,
      label: String,
      features: Option[String]
  ): StructType = {
    (features.toSeq :+ "prediction").foreach(SchemaUtils.requireAbsent(stage, schema, _))
    StructType(
      schema.fields ++ features.map(StructField(_, VectorType)) :+
        StructField(
          "prediction",
          DoubleType,
          metadata = ScoreMetadata("prediction", "regression", label)
        )
    )
  }
}
