package mmlspark.explainers

import mmlspark.contracts.{HasInputCols, SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{element_at, when}
import org.apache.spark.sql.types.StructType

/** Kernel SHAP values of the columns `inputCols` for each row: per target class, a vector [base
  * value, phi_1, ..., phi_M] (the base value is the model's mean over the background rows, and the
  * phis sum to the row's value less it), and in metricsCol the r2 of the weighted fit.
  */
final class TabularSHAP(override val uid: String)
    extends Transformer
    with ExplainerParams
    with HasInputCols {

  def this() = this(Identifiable.randomUID("TabularSHAP"))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(inputCols) && $(inputCols).nonEmpty,
      ExplainerMessages.NoInputCols()
    )
    SchemaUtils.requireDistinct(this, "inputCols", $(inputCols).toSeq)
    $(inputCols).foreach(SchemaUtils.requireColumn(this, schema, _))
    checkCommon(schema)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val background = requireBackground()
    val cols = $(inputCols)
    cols.foreach(SchemaUtils.requireColumn(this, background.schema, _))
    val bg = cols.indices.map(j => Explaining.Prefix + "bg_" + j)
    val aliased = background.select(cols.toSeq.zip(bg).map { case (c, b) =>
      Explaining.col(c).cast(data.schema(c).dataType).as(b)
    }: _*)
    Explaining.shap(
      this,
      data,
      cols.length,
      cols.toSeq,
      aliased,
      mask =>
        cols.indices.map { j =>
          cols(j) -> when(element_at(mask, j + 1) === 1.0, Explaining.col(cols(j)))
            .otherwise(Explaining.col(bg(j)))
        }
    )
  }

  override def copy(extra: ParamMap): TabularSHAP = {
    val copied = copyValues(new TabularSHAP(uid), extra)
    copyBackground(copied)
    StageParams.copyStages(this, copied, extra)
  }
}

object TabularSHAP extends StageReadable[TabularSHAP] {
  override protected def create(
      uid: String,
      path: String,
      spark: org.apache.spark.sql.SparkSession
  ): TabularSHAP = {
    val stage = new TabularSHAP(uid)
    ExplainerParams.loadBackground(path, spark).foreach(stage.setBackgroundData)
    stage
  }
}
