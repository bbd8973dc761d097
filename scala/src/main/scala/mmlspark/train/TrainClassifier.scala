package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Estimator
import org.apache.spark.ml.classification.Classifier
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.functions.{array_position, col, lit, typedLit}
import org.apache.spark.sql.types._

/** Trains any Spark ML classifier on a DataFrame of mixed columns, featurizing them itself (see the
  * README: numbers and booleans as they are with nulls imputed by the mean, categorical strings
  * indexed and one-hot encoded with one bucket for null and unseen values, free-text strings
  * tokenized and hashed into `numFeatures` buckets, arrays and vectors assembled).
  *
  * The label may be of any type (string, boolean, number); its distinct values, sorted (or in the
  * order `labels` gives), are the classes, and the fitted [[TrainedClassifierModel]] predicts them
  * in the label's own type. With `reindexLabel` false a numeric label is used as the class index
  * itself. Rows whose label is null are dropped (their count is logged).
  */
final class TrainClassifier(override val uid: String)
    extends Estimator[TrainedClassifierModel]
    with TrainClassifierDecls
    with TrainParams {

  def this() = this(Identifiable.randomUID("TrainClassifier"))

  setDefault(reindexLabel -> true)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(model),
      TrainMessages.NoLearner("kind" -> "classifier")
    )
    SchemaUtils.require(
      this,
      $(model).isInstanceOf[Classifier[_, _, _]],
      TrainMessages.WrongLearner("kind" -> "classifier", "held" -> $(model).getClass.getName)
    )
    val label = SchemaUtils.requireColumnType(
      this,
      schema,
      $(labelCol),
      TrainMessages.ClassLabel()
    ) {
      case StringType | BooleanType => true
      case t => t.isInstanceOf[NumericType]
    }
    SchemaUtils.require(
      this,
      $(reindexLabel) || label.dataType.isInstanceOf[NumericType],
      TrainMessages.LabelNotIndex("column" -> $(labelCol), "actual" -> label.dataType.catalogString)
    )
    SchemaUtils.require(
      this,
      $(reindexLabel) || !isDefined(labels),
      TrainMessages.LabelsWithoutReindex()
    )
    Featurization.check(this, schema, featureColumns(schema))
    TrainedClassifierModel.outputSchema(
      this,
      schema,
      label.dataType,
      $(model),
      $(labelCol),
      get(featuresCol)
    )
  }

  override def fit(dataset: Dataset[_]): TrainedClassifierModel = {
    transformSchema(dataset.schema, logging = true)
    val labelType = dataset.schema($(labelCol)).dataType
    val data = Training.labelled(this, dataset, $(labelCol))
    val label = col(SchemaUtils.quoted($(labelCol)))
    val seen = data
      .select(label, label.cast(StringType))
      .distinct()
      .collect()
      .sortWith(TrainClassifier.before(labelType))
    SchemaUtils.require(this, seen.nonEmpty, TrainMessages.NoLabel("column" -> $(labelCol)))
    val levels =
      if (! $(reindexLabel)) {
        val values = seen.map(_.getAs[Number](0).doubleValue())
        SchemaUtils.require(
          this,
          values.forall(v => v >= 0 && v == math.rint(v)),
          TrainMessages.LabelsNotIndices(
            "column" -> $(labelCol),
            "values" -> seen
              .map(_.getString(1))
              .filterNot(s =>
                scala.util.Try(s.toDouble).toOption.exists(v => v >= 0 && v == math.rint(v))
              )
              .take(5)
              .mkString(", ")
          )
        )
        val count = values.max.toInt + 1
        (0 until count).map { i =>
          labelType match {
            case DoubleType | FloatType | _: DecimalType => i.toDouble.toString
            case _ => i.toString
          }
        }.toArray
      } else
        get(labels) match {
          case Some(given) =>
            val unknown = seen.map(_.getString(1)).filterNot(given.contains)
            SchemaUtils.require(
              this,
              unknown.isEmpty,
              TrainMessages.UnknownLabels(
                "unknown" -> TrainMessages.quoted(unknown.take(5)),
                "given" -> given.mkString(", ")
              )
            )
            given
          case None => seen.map(_.getString(1))
        }
    val classIndex =
      if ($(reindexLabel)) array_position(typedLit(levels), label.cast(StringType)) - lit(1)
      else label
    val trained = new TrainedClassifierModel(uid).setLevels(levels)
    fitInto(dataset, data, classIndex, labelType.sql.toLowerCase, trained).setParent(this)
  }

  override def copy(extra: ParamMap): TrainClassifier =
    StageParams.copyStages(this, defaultCopy[TrainClassifier](extra), extra)
}

object TrainClassifier extends StageReadable[TrainClassifier] {

  /** Orders (value, value as string) label rows by value: numbers numerically, others as text. */
  private[train] def before(t: DataType)(a: Row, b: Row): Boolean = t match {
    case _: NumericType => a.getAs[Number](0).doubleValue() < b.getAs[Number](0).doubleValue()
    case BooleanType => !a.getBoolean(0) && b.getBoolean(0)
    case _ => a.getString(1) < b.getString(1)
  }
}
