package mmlspark.explainers

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.functions.{array_to_vector, vector_to_array}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions.{element_at, lit, sequence, transform => each, when}
import org.apache.spark.sql.types.StructType

/** Kernel SHAP values of the elements of the vector column `inputCol` for each row: per target
  * class, a vector [base value, phi_1, ..., phi_M] (the base value is the model's mean over the
  * background rows, and the phis sum to the row's value less it), and in metricsCol the r2 of the
  * weighted fit.
  */
final class VectorSHAP(override val uid: String) extends Transformer with VectorInput {

  def this() = this(Identifiable.randomUID("VectorSHAP"))

  override def transformSchema(schema: StructType): StructType = checkVectorSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    val (data, background) = checkedInput(dataset)
    val bg = Explaining.Prefix + "bg"
    val aliased = background.select(vector_to_array(Explaining.col($(inputCol))).as(bg))
    val size = VectorSHAP.size(this, aliased)
    val x = vector_to_array(Explaining.col($(inputCol)))
    Explaining.shap(
      this,
      data,
      size,
      Seq($(inputCol)),
      aliased,
      mask =>
        Seq(
          $(inputCol) -> array_to_vector(
            each(
              sequence(lit(1), lit(size)),
              i =>
                when(element_at(mask, i) === 1.0, element_at(x, i))
                  .otherwise(element_at(Explaining.col(bg), i))
            )
          )
        )
    )
  }

  override def copy(extra: ParamMap): VectorSHAP = {
    val copied = copyValues(new VectorSHAP(uid), extra)
    copyBackground(copied)
    StageParams.copyStages(this, copied, extra)
  }
}

object VectorSHAP extends StageReadable[VectorSHAP] {

  /** The length of the background's vectors (the first row's). */
  private[explainers] def size(stage: ExplainerParams, arrays: DataFrame): Int = {
    val first = arrays.head(1)
    SchemaUtils.require(
      stage,
      first.nonEmpty && !first(0).isNullAt(0),
      ExplainerMessages.EmptyBackground()
    )
    first(0).getSeq[Double](0).length
  }

  override protected def create(uid: String, path: String, spark: SparkSession): VectorSHAP = {
    val stage = new VectorSHAP(uid)
    ExplainerParams.loadBackground(path, spark).foreach(stage.setBackgroundData)
    stage
  }
}
