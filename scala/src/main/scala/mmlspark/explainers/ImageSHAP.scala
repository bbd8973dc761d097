package mmlspark.explainers

import mmlspark.contracts.{StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Kernel SHAP values of the superpixels of each image in `inputCol` (an image struct or encoded
  * bytes): a coalition keeps its superpixels and turns the others black, so the base value is the
  * model's score of the black image. Per target class, a vector [base value, phi_1, ..., phi_K]
  * over the image's K superpixels (the phis sum to the image's score less the base value); in
  * metricsCol the r2 of the weighted fit; in superpixelCol the superpixels.
  */
final class ImageSHAP(override val uid: String) extends Transformer with ImageExplainerParams {

  def this() = this(Identifiable.randomUID("ImageSHAP"))

  override def transformSchema(schema: StructType): StructType = checkImageSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val samples = if (isDefined(numSamples)) Some($(numSamples)) else None
    ImageExplaining.explain(this, data, ImageExplaining.Shap(samples))
  }

  override def copy(extra: ParamMap): ImageSHAP =
    StageParams.copyStages(this, copyValues(new ImageSHAP(uid), extra), extra)
}

object ImageSHAP extends StageReadable[ImageSHAP]
