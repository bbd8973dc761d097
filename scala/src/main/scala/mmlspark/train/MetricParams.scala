package mmlspark.train

import mmlspark.contracts.{HasLabelCol, HasPredictionCol, SchemaUtils}
import org.apache.spark.ml.attribute.{Attribute, NominalAttribute}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.Params
import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._

/** Params of the statistics stages: which columns hold the label and the scores, and the task.
  *
  * A column param that is not set explicitly is found from the input's score metadata
  * ([[ScoreMetadata]], written by the models of TrainClassifier and TrainRegressor): the one
  * prediction column that carries it, the label column it names and the probability column of the
  * same model. Without such metadata the params' defaults are used.
  */
private[train] trait MetricParams
    extends Params
    with MetricParamsDecls
    with HasLabelCol
    with HasPredictionCol {

  setDefault(
    labelCol -> "label",
    predictionCol -> "prediction",
    probabilityCol -> "probability",
    evaluationMetric -> "auto"
  )

  /** The prediction field carrying score metadata that this stage reads, if any. */
  private def scoredPrediction(schema: StructType): Option[StructField] =
    if (isSet(predictionCol)) schema.fields.find(_.name == $(predictionCol))
    else {
      val found = schema.fields.filter(f => ScoreMetadata.role(f.metadata).contains("prediction"))
      SchemaUtils.require(
        this,
        found.length <= 1,
        TrainMessages.ManyPredictions("columns" -> TrainMessages.quoted(found.map(_.name)))
      )
      found.headOption
    }

  private def existing(schema: StructType, column: String, param: String): String = {
    SchemaUtils.require(
      this,
      isSet(getParam(param)) || scoredPrediction(schema).isDefined ||
        schema.fieldNames.contains(column),
      TrainMessages.NoScoreColumn(
        "param" -> param,
        "column" -> column,
        "available" -> schema.fieldNames.mkString(", ")
      )
    )
    column
  }

  /** The label column: `labelCol` if set, else the one the score metadata names, else the default.
    */
  protected def labelColumn(schema: StructType): String =
    existing(
      schema,
      if (isSet(labelCol)) $(labelCol)
      else
        scoredPrediction(schema)
          .flatMap(f => ScoreMetadata.labelCol(f.metadata))
          .getOrElse($(labelCol)),
      "labelCol"
    )

  /** The prediction column: `predictionCol` if set, else the one with score metadata, else the
    * default.
    */
  protected def predictionColumn(schema: StructType): String =
    existing(
      schema,
      scoredPrediction(schema).map(_.name).getOrElse($(predictionCol)),
      "predictionCol"
    )

  /** The column of class scores of `role` ('probability' or 'rawPrediction') of the same model as
    * the prediction column, by score metadata.
    */
  private def scoredColumn(schema: StructType, role: String): Option[String] =
    scoredPrediction(schema).flatMap { p =>
      val label = ScoreMetadata.labelCol(p.metadata)
      schema.fields
        .find(f =>
          ScoreMetadata.role(f.metadata).contains(role) &&
            ScoreMetadata.labelCol(f.metadata) == label
        )
        .map(_.name)
    }

  /** The probability column: `probabilityCol` if set, else the scored model's, else the default. */
  protected def probabilityColumn(schema: StructType): String =
    if (isSet(probabilityCol)) $(probabilityCol)
    else scoredColumn(schema, "probability").getOrElse($(probabilityCol))

  /** The vector column scores are read from: probabilities, else raw predictions, else none. */
  protected def scoreColumn(schema: StructType): Option[String] =
    (Seq(probabilityColumn(schema)) ++ scoredColumn(schema, "rawPrediction") :+ "rawPrediction")
      .find(c => schema.fieldNames.contains(c) && schema(c).dataType == VectorType)

  /** Whether the task is classification, after checking the columns fit it. */
  protected def isClassification(schema: StructType): Boolean = {
    val labelName = labelColumn(schema)
    val predictionName = predictionColumn(schema)
    SchemaUtils.requireColumn(this, schema, labelName)
    val prediction = SchemaUtils.requireColumn(this, schema, predictionName)
    val classification = $(evaluationMetric) match {
      case "classification" => true
      case "regression" => false
      case _ =>
        ScoreMetadata.kind(prediction.metadata) match {
          case Some(kind) => kind == "classification"
          case None =>
            scoreColumn(schema).isDefined || !Seq(DoubleType, FloatType).contains(
              prediction.dataType
            ) ||
            MetricParams.classes(prediction.metadata).isDefined
        }
    }
    if (!classification)
      Seq(labelName, predictionName).foreach { c =>
        SchemaUtils.requireColumnType(this, schema, c, "numeric for a regression metric")(
          _.isInstanceOf[NumericType]
        )
      }
    classification
  }

  /** Label and prediction as comparable strings: numbers as doubles, so 1 and 1.0 are one class. */
  protected def asClasses(df: DataFrame): (Column, Column) = {
    val (labelName, predictionName) = (labelColumn(df.schema), predictionColumn(df.schema))
    val (l, p) = (df.schema(labelName).dataType, df.schema(predictionName).dataType)
    def key(c: String): Column = {
      val column = col(SchemaUtils.quoted(c))
      (if (l.isInstanceOf[NumericType] && p.isInstanceOf[NumericType]) column.cast(DoubleType)
       else column)
        .cast(StringType)
    }
    (key(labelName), key(predictionName))
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

/** Score metadata: what a trained model's output column is, stored in the column's Spark metadata
  * under [[key]] as `role` ('prediction', 'probability' or 'rawPrediction'), `kind`
  * ('classification' or 'regression') and `labelCol` (the label column the model was trained on).
  * The statistics stages find their columns by it.
  */
object ScoreMetadata {
  val key = "mmlspark.score"

  def apply(role: String, kind: String, labelCol: String): Metadata =
    new MetadataBuilder()
      .putMetadata(
        key,
        new MetadataBuilder()
          .putString("role", role)
          .putString("kind", kind)
          .putString("labelCol", labelCol)
          .build()
      )
      .build()

  /** `base` with the entries of `extra` added (replacing equal keys). */
  def merge(base: Metadata, extra: Metadata): Metadata =
    new MetadataBuilder().withMetadata(base).withMetadata(extra).build()

  private def entry(metadata: Metadata, name: String): Option[String] =
    if (metadata.contains(key) && metadata.getMetadata(key).contains(name))
      Some(metadata.getMetadata(key).getString(name))
    else None

  def role(metadata: Metadata): Option[String] = entry(metadata, "role")
  def kind(metadata: Metadata): Option[String] = entry(metadata, "kind")
  def labelCol(metadata: Metadata): Option[String] = entry(metadata, "labelCol")
}
