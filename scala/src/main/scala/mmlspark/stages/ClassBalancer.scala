package mmlspark.stages

import mmlspark.contracts.{HasInputCol, HasOutputCol, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Estimator
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.Dataset
import org.apache.spark.sql.functions.{count, lit, sum}
import org.apache.spark.sql.types.StructType

/** Shared by [[ClassBalancer]] and [[ClassBalancerModel]]. */
private[stages] trait ClassBalancerParams
    extends HasInputCol
    with ClassBalancerParamsDecls
    with HasOutputCol {

  setDefault(inputCol -> "label", outputCol -> "weight", broadcastJoin -> true)

  protected def checkLabel(schema: StructType): Unit =
    SchemaUtils.requireColumnType(this, schema, $(inputCol), "an atomic (non-nested) type") { t =>
      !t.isInstanceOf[org.apache.spark.sql.types.StructType] &&
      !t.isInstanceOf[org.apache.spark.sql.types.ArrayType] &&
      !t.isInstanceOf[org.apache.spark.sql.types.MapType]
    }

  protected def weightedSchema(schema: StructType): StructType = {
    checkLabel(schema)
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    schema.add($(outputCol), org.apache.spark.sql.types.DoubleType)
  }
}

/** Learns an inverse-frequency weight per class of `inputCol`, so that every class carries the same
  * total weight: `weight(c) = n / (k * count(c))` for `n` rows and `k` classes (the "balanced"
  * weighting of scikit-learn). A null label is a class of its own.
  */
final class ClassBalancer(override val uid: String)
    extends Estimator[ClassBalancerModel]
    with ClassBalancerParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("ClassBalancer"))

  override def transformSchema(schema: StructType): StructType = weightedSchema(schema)

  override def fit(dataset: Dataset[_]): ClassBalancerModel = {
    transformSchema(dataset.schema, logging = true)
    val counts = dataset
      .groupBy(dataset.col(SchemaUtils.quoted($(inputCol))).as("label"))
      .agg(count(lit(1)).as("count"))
      .cache()
    try {
      val totals = counts.agg(sum("count"), count(lit(1))).head()
      SchemaUtils.require(this, !totals.isNullAt(0), "cannot fit on an empty dataset")
      val (n, k) = (totals.getLong(0).toDouble, totals.getLong(1).toDouble)
      val weights =
        counts.select(counts("label"), (lit(n) / (lit(k) * counts("count"))).as("weight")).collect()
      val labelType = dataset.schema($(inputCol)).dataType
      copyValues(
        new ClassBalancerModel(uid, labelType, weights.map(_.get(0)), weights.map(_.getDouble(1)))
      )
        .setParent(this)
    } finally counts.unpersist()
  }

  override def copy(extra: ParamMap): ClassBalancer = defaultCopy(extra)
}

object ClassBalancer extends StageReadable[ClassBalancer]
