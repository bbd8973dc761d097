package mmlspark.explainers

import mmlspark.contracts.{StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** LIME for the superpixels of each image in `inputCol` (an image struct or encoded bytes): each of
  * `numSamples` samples keeps every superpixel with probability `samplingFraction` and turns the
  * others black (the first keeps them all), the samples are scored by the model, weighted by
  * sqrt(exp(-d^2 / kernelWidth^2)) (d^2 the number of superpixels turned off) and fitted with a
  * weighted ridge regression. Per target class, a vector of one coefficient per superpixel; in
  * metricsCol the weighted r2 of the fit; in superpixelCol the superpixels (see [[ImageExplaining]]
  * for the size they are computed at).
  */
final class ImageLIME(override val uid: String)
    extends Transformer
    with LIMEParams
    with ImageExplainerParams
    with ImageLIMEDecls {

  def this() = this(Identifiable.randomUID("ImageLIME"))

  setDefault(samplingFraction -> 0.7)

  override def transformSchema(schema: StructType): StructType = checkImageSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val width = if (isDefined(kernelWidth)) Some($(kernelWidth)) else None
    ImageExplaining.explain(
      this,
      data,
      ImageExplaining.Lime($(numSamples), $(samplingFraction), width, $(regularization))
    )
  }

  override def copy(extra: ParamMap): ImageLIME =
    StageParams.copyStages(this, copyValues(new ImageLIME(uid), extra), extra)
}

object ImageLIME extends StageReadable[ImageLIME]
