package mmlspark.train

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{abs, array_position, col, lit, pow, typedLit, udf}
import org.apache.spark.sql.types._

/** Adds each row's loss: for classification `log_loss`, minus the log of the probability given to
  * the true class (clipped to [eps, 1 - eps], eps the double precision's, as scikit-learn does);
  * for regression `L1_loss` (absolute error) and `L2_loss` (squared error). The true class is found
  * by name in the classes the prediction column's metadata lists (as a TrainedClassifierModel
  * writes them), otherwise the label is the class index (Spark's convention). A row with a null
  * label, prediction or probability gets a null loss. The label, prediction and probability columns
  * are found from a trained model's score metadata when their params are not set (see
  * [[MetricParams]]).
  */
final class ComputePerInstanceStatistics(override val uid: String)
    extends Transformer
    with MetricParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("ComputePerInstanceStatistics"))

  override def transformSchema(schema: StructType): StructType =
    if (isClassification(schema)) {
      SchemaUtils.requireColumnType(
        this,
        schema,
        probabilityColumn(schema),
        "a vector of class probabilities for log-loss"
      )(
        _ == VectorType
      )
      SchemaUtils.requireAbsent(this, schema, "log_loss")
      schema.add("log_loss", DoubleType)
    } else {
      Seq("L1_loss", "L2_loss").foreach(SchemaUtils.requireAbsent(this, schema, _))
      schema.add("L1_loss", DoubleType).add("L2_loss", DoubleType)
    }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val schema = transformSchema(dataset.schema, logging = true)
    val (labelName, predictionName) =
      (labelColumn(dataset.schema), predictionColumn(dataset.schema))
    val label = col(SchemaUtils.quoted(labelName))
    val prediction = col(SchemaUtils.quoted(predictionName))
    if (schema.fieldNames.contains("log_loss")) {
      val index = MetricParams.classes(dataset.schema(predictionName).metadata) match {
        case Some(classes) => array_position(typedLit(classes), label.cast(StringType)) - lit(1)
        case None => label.cast(LongType)
      }
      val logLoss = udf { (p: Vector, k: java.lang.Long) =>
        if (p == null || k == null) null
        else if (k < 0 || k >= p.size) java.lang.Double.valueOf(Double.NaN) // not a known class
        else {
          val eps = Math.ulp(1.0)
          java.lang.Double.valueOf(-math.log(math.min(math.max(p(k.toInt), eps), 1 - eps)))
        }
      }
      dataset.withColumn(
        "log_loss",
        logLoss(col(SchemaUtils.quoted(probabilityColumn(dataset.schema))), index)
      )
    } else {
      val error = prediction.cast(DoubleType) - label.cast(DoubleType)
      dataset.withColumn("L1_loss", abs(error)).withColumn("L2_loss", pow(error, 2))
    }
  }

  override def copy(extra: ParamMap): ComputePerInstanceStatistics = defaultCopy(extra)
}

object ComputePerInstanceStatistics extends StageReadable[ComputePerInstanceStatistics]
