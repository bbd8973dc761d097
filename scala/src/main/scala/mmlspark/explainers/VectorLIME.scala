package mmlspark.explainers

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.functions.{array_to_vector, vector_to_array}
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions.{array, element_at, lit, sequence, transform => each}
import org.apache.spark.sql.types.StructType

/** LIME for the elements of the vector column `inputCol` of each row: samples around the row (each
  * element moved by a normal draw scaled by its standard deviation in the background), scored by
  * the model, weighted by an exponential kernel of their distance to the row, and fitted with a
  * weighted ridge regression. Per target class, a vector of the coefficients (per standard
  * deviation of each element); in metricsCol the weighted r2 of the fit.
  */
final class VectorLIME(override val uid: String)
    extends Transformer
    with LIMEParams
    with VectorInput {

  def this() = this(Identifiable.randomUID("VectorLIME"))

  override def transformSchema(schema: StructType): StructType = checkVectorSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    val (data, background) = checkedInput(dataset)
    val vectors = background
      .select(Explaining.col($(inputCol)))
      .collect()
      .filterNot(_.isNullAt(0))
      .map(_.getAs[Vector](0).toArray)
    SchemaUtils.require(this, vectors.nonEmpty, ExplainerMessages.EmptyBackground())
    val size = vectors.head.length
    val stds = Array.tabulate(size) { j =>
      val mean = vectors.map(_(j)).sum / vectors.length
      val std = math.sqrt(vectors.map(v => (v(j) - mean) * (v(j) - mean)).sum / vectors.length)
      if (std > 0) std else 1.0
    }
    val rep = Explaining.Rep -> array((0 until size).map(Explaining.normal): _*)
    val x = vector_to_array(Explaining.col($(inputCol)))
    val scale = array(stds.toSeq.map(lit(_)): _*)
    val moved = $(inputCol) -> array_to_vector(
      each(
        sequence(lit(1), lit(size)),
        i => element_at(x, i) + element_at(scale, i) * element_at(Explaining.col(Explaining.Rep), i)
      )
    )
    Explaining.lime(this, data, size, Seq($(inputCol)), Seq(rep, moved), Array.fill(size)(false))
  }

  override def copy(extra: ParamMap): VectorLIME = {
    val copied = copyValues(new VectorLIME(uid), extra)
    copyBackground(copied)
    StageParams.copyStages(this, copied, extra)
  }
}

object VectorLIME extends StageReadable[VectorLIME] {
  override protected def create(uid: String, path: String, spark: SparkSession): VectorLIME = {
    val stage = new VectorLIME(uid)
    ExplainerParams.loadBackground(path, spark).foreach(stage.setBackgroundData)
    stage
  }
}
