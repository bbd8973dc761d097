package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.{Model, PipelineStage}
import org.apache.spark.ml.attribute.NominalAttribute
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.{ParamMap, Params}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{col, element_at, lit, typedLit}
import org.apache.spark.sql.types._

/** A classifier trained by [[TrainClassifier]]: featurizes like at training, runs the fitted
  * learner and adds its `rawPrediction` and `probability` (as the learner names them; index `i` is
  * the class `levels(i)`) and `prediction`, the predicted class in the label's type, with the
  * classes in its ML attribute metadata. Each of these columns also carries score metadata
  * ([[ScoreMetadata]]: its role, the task and the label column) by which
  * [[ComputeModelStatistics]], [[ComputePerInstanceStatistics]] and `FindBestModel` find their
  * columns when not told. When `featuresCol` is set, the assembled feature vector is kept under
  * that name.
  */
final class TrainedClassifierModel(override val uid: String)
    extends Model[TrainedClassifierModel]
    with TrainedClassifierModelDecls {

  def this() = this(Identifiable.randomUID("TrainedClassifierModel"))

  override def transformSchema(schema: StructType): StructType = {
    Featurization.check(this, schema, $(inputCols).toSeq)
    TrainedClassifierModel.outputSchema(
      this,
      schema,
      DataType.fromDDL($(labelType)),
      $(model),
      $(labelCol),
      get(featuresCol)
    )
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val schema = transformSchema(dataset.schema, logging = true)
    val predicted = element_at(typedLit($(levels)), col(indexCol).cast(IntegerType) + lit(1))
      .cast(DataType.fromDDL($(labelType)))
    val scored = score(dataset)
      .withColumn(
        "prediction",
        predicted.as(
          "prediction",
          ScoreMetadata.merge(
            TrainedClassifierModel.classes($(levels)),
            schema("prediction").metadata
          )
        )
      )
    val vectors =
      schema.fields.filter(f => ScoreMetadata.role(f.metadata).exists(_ != "prediction"))
    dropWorkColumns(
      vectors.foldLeft(scored)((df, f) =>
        df.withColumn(f.name, col(SchemaUtils.quoted(f.name)).as(f.name, f.metadata))
      )
    )
  }

  override def copy(extra: ParamMap): TrainedClassifierModel =
    StageParams.copyStages(
      this,
      copyValues(new TrainedClassifierModel(uid), extra).setParent(parent),
      extra
    )
}

object TrainedClassifierModel extends StageReadable[TrainedClassifierModel] {

  /** The ML attribute metadata naming the classes of a prediction column. */
  def classes(levels: Array[String]): Metadata =
    NominalAttribute.defaultAttr
      .withName("prediction")
      .withValues(levels)
      .toMetadata()

  private[train] def outputSchema(
      stage: Params,
      schema: StructType,
      labelType: DataType,
      learner: PipelineStage,
      label: String,
      features: Option[String]
  ): StructType = {
    val vectorCols = Seq("rawPredictionCol" -> "rawPrediction", "probabilityCol" -> "probability")
      .collect {
        case (p, role) if learner.hasParam(p) =>
          learner.getOrDefault(learner.getParam(p)).toString -> role
      }
    val added = features.toSeq ++ vectorCols.map(_._1) :+ "prediction"
    added.foreach(SchemaUtils.requireAbsent(stage, schema, _))
    def meta(role: String) = ScoreMetadata(role, "classification", label)
    StructType(
      schema.fields ++ features.map(StructField(_, VectorType)) ++ vectorCols.map {
        case (c, role) =>
          StructField(c, VectorType, metadata = meta(role))
      } :+
        StructField("prediction", labelType, metadata = meta("prediction"))
    )
  }
}
