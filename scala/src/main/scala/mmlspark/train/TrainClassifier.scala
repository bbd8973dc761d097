package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.{Estimator, Model}
import org.apache.spark.ml.classification.Classifier
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Dataset, Row}
import org.apache.spark.sql.functions.{array_position, col, lit, typedLit}
import org.apache.spark.sql.types._

/** Trains any Spark ML classifier on a DataFrame of mixed columns, featurizing them itself (see the
  * README: numbers and booleans as they are with nulls imputed by the mean, strings indexed and
  * one-hot encoded with one bucket for null and unseen values, arrays and vectors assembled).
  *
  * The label may be of any type (string, boolean, number); its distinct values, sorted, are the
  * classes, and the fitted [[TrainedClassifierModel]] predicts them in the label's own type. Rows
  * whose label is null are dropped (their count is logged).
  */
final class TrainClassifier(override val uid: String)
    extends Estimator[TrainedClassifierModel]
    with TrainParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("TrainClassifier"))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(model),
      "param 'model' must be set to a Spark ML classifier"
    )
    SchemaUtils.require(
      this,
      $(model).isInstanceOf[Classifier[_, _, _]],
      s"param 'model' must be a Spark ML classifier but is ${$(model).getClass.getName}"
    )
    val label = SchemaUtils.requireColumnType(
      this,
      schema,
      $(labelCol),
      "a string, boolean or numeric label"
    ) {
      case StringType | BooleanType => true
      case t => t.isInstanceOf[NumericType]
    }
    Featurization.check(this, schema, featureColumns(schema))
    TrainedClassifierModel.outputSchema(this, schema, label.dataType, $(model))
  }

  override def fit(dataset: Dataset[_]): TrainedClassifierModel = {
    transformSchema(dataset.schema, logging = true)
    val labelType = dataset.schema($(labelCol)).dataType
    val data = Training.labelled(this, dataset, $(labelCol))
    val label = col(SchemaUtils.quoted($(labelCol)))
    val levels = data
      .select(label, label.cast(StringType))
      .distinct()
      .collect()
      .sortWith(TrainClassifier.before(labelType))
      .map(_.getString(1))
    SchemaUtils.require(this, levels.nonEmpty, s"no row has a label in '${$(labelCol)}'")
    val columns = featureColumns(dataset.schema)
    val features = helperPrefix + "features"
    val index = helperPrefix + "label"
    val featurization = Featurization.fit(this, data, columns, features, helperPrefix)
    val indexed = Featurization(featurization, data, helperPrefix, features)
      .withColumn(
        index,
        (array_position(typedLit(levels), label.cast(StringType)) - lit(1)).cast(DoubleType)
      )
    val learner = Training.configure(this, $(model), features, index, helperPrefix + "prediction")
    val fitted = learner.asInstanceOf[org.apache.spark.ml.Estimator[_]].fit(indexed)
    copyValues(new TrainedClassifierModel(uid))
      .setInputCols(columns.toArray)
      .setLevels(levels)
      .setLabelType(labelType.sql.toLowerCase)
      .setFeaturization(featurization)
      .setModel(fitted.asInstanceOf[Model[_]])
      .setParent(this)
  }

  override def copy(extra: ParamMap): TrainClassifier = {
    val copied = defaultCopy[TrainClassifier](extra)
    get(model).foreach(m => copied.setModel(m.copy(extra)))
    copied
  }
}

object TrainClassifier extends StageReadable[TrainClassifier] {

  /** Orders (value, value as string) label rows by value: numbers numerically, others as text. */
  private[train] def before(t: DataType)(a: Row, b: Row): Boolean = t match {
    case _: NumericType => a.getAs[Number](0).doubleValue() < b.getAs[Number](0).doubleValue()
    case BooleanType => !a.getBoolean(0) && b.getBoolean(0)
    case _ => a.getString(1) < b.getString(1)
  }
}
