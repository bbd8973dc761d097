package mmlspark.train

import mmlspark.contracts.{HasLabelCol, HasPredictionCol, SchemaUtils}
import org.apache.spark.ml.attribute.{Attribute, NominalAttribute}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.{Param, ParamValidators, Params}
import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._

/** Params of the statistics stages: which columns hold the label and the scores, and the task. */
private[train] trait MetricParams extends Params with HasLabelCol with HasPredictionCol {

  final val probabilityCol: Param[String] = new Param[String](
    this,
    "probabilityCol",
    "name of the vector column of class probabilities, used for AUC and log-loss when present " +
      "(rawPrediction is used for AUC when it is not)",
    (name: String) => name != null && name.nonEmpty
  )

  final val evaluationMetric: Param[String] = new Param[String](
    this,
    "evaluationMetric",
    "the task: 'classification', 'regression', or 'auto': classification when the input " +
      "has a probability or rawPrediction column or the prediction is not floating-point or names " +
      "its classes in its metadata, regression otherwise",
    ParamValidators.inArray(Array("auto", "classification", "regression"))
  )

  setDefault(
    labelCol -> "label",
    predictionCol -> "prediction",
    probabilityCol -> "probability",
    evaluationMetric -> "auto"
  )

  def getProbabilityCol: String = $(probabilityCol)
  def setProbabilityCol(value: String): this.type = set(probabilityCol, value)
  def getEvaluationMetric: String = $(evaluationMetric)
  def setEvaluationMetric(value: String): this.type = set(evaluationMetric, value)

  /** The vector column scores are read from: probabilities, else raw predictions, else none. */
  protected def scoreColumn(schema: StructType): Option[String] =
    Seq($(probabilityCol), "rawPrediction").find(c =>
      schema.fieldNames.contains(c) && schema(c).dataType == VectorType
    )

  /** Whether the task is classification, after checking the columns fit it. */
  protected def isClassification(schema: StructType): Boolean = {
    SchemaUtils.requireColumn(this, schema, $(labelCol))
    val prediction = SchemaUtils.requireColumn(this, schema, $(predictionCol))
    val classification = $(evaluationMetric) match {
      case "classification" => true
      case "regression" => false
      case _ =>
        scoreColumn(schema).isDefined || !Seq(DoubleType, FloatType).contains(
          prediction.dataType
        ) ||
        MetricParams.classes(prediction.metadata).isDefined
    }
    if (!classification)
      Seq($(labelCol), $(predictionCol)).foreach { c =>
        SchemaUtils.requireColumnType(this, schema, c, "numeric for a regression metric")(
          _.isInstanceOf[NumericType]
        )
      }
    classification
  }

  /** Label and prediction as comparable strings: numbers as doubles, so 1 and 1.0 are one class. */
  protected def asClasses(df: DataFrame): (Column, Column) = {
    val (l, p) = (df.schema($(labelCol)).dataType, df.schema($(predictionCol)).dataType)
    def key(c: String): Column = {
      val column = col(SchemaUtils.quoted(c))
      (if (l.isInstanceOf[NumericType] && p.isInstanceOf[NumericType]) column.cast(DoubleType)
       else column)
        .cast(StringType)
    }
    (key($(labelCol)), key($(predictionCol)))
  }
}

private[train] object MetricParams {

  /** The class names a prediction column's ML attribute metadata lists, if any. */
  def classes(metadata: Metadata): Option[Array[String]] =
    scala.util
      .Try(Attribute.fromStructField(StructField("p", DoubleType, metadata = metadata)))
      .toOption
      .collect {
        case n: NominalAttribute if n.values.isDefined => n.values.get
      }
}
