package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.{Model, PipelineStage}
import org.apache.spark.ml.attribute.NominalAttribute
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.{ParamMap, Params, StringArrayParam}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{col, element_at, lit, typedLit}
import org.apache.spark.sql.types._

/** A classifier trained by [[TrainClassifier]]: featurizes like at training, runs the fitted
  * learner and adds its `rawPrediction` and `probability` (as the learner names them; index `i` is
  * the class `levels(i)`) and `prediction`, the predicted class in the label's type, with the
  * classes in its ML attribute metadata.
  */
final class TrainedClassifierModel(override val uid: String)
    extends Model[TrainedClassifierModel]
    with TrainedParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("TrainedClassifierModel"))

  final val levels = new StringArrayParam(
    this,
    "levels",
    "the classes, in the order of the learner's class indices (the distinct training labels, sorted), as strings"
  )

  def getLevels: Array[String] = $(levels)
  def setLevels(value: Array[String]): this.type = set(levels, value)

  override def transformSchema(schema: StructType): StructType = {
    Featurization.check(this, schema, $(inputCols).toSeq)
    TrainedClassifierModel.outputSchema(this, schema, DataType.fromDDL($(labelType)), $(model))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val predicted = element_at(typedLit($(levels)), col(indexCol).cast(IntegerType) + lit(1))
      .cast(DataType.fromDDL($(labelType)))
    score(dataset)
      .withColumn(
        "prediction",
        predicted.as("prediction", TrainedClassifierModel.classes($(levels)))
      )
      .drop(featuresCol, indexCol)
  }

  override def copy(extra: ParamMap): TrainedClassifierModel =
    copyInto(copyValues(new TrainedClassifierModel(uid), extra).setParent(parent), extra)
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
      learner: PipelineStage
  ): StructType = {
    val vectorCols = Seq("rawPredictionCol", "probabilityCol").collect {
      case p if learner.hasParam(p) => learner.getOrDefault(learner.getParam(p)).toString
    }
    val added = vectorCols :+ "prediction"
    added.foreach(SchemaUtils.requireAbsent(stage, schema, _))
    StructType(
      schema.fields ++ vectorCols.map(StructField(_, VectorType)) :+
        StructField("prediction", labelType)
    )
  }
}
