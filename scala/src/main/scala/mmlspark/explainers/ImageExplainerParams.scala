package mmlspark.explainers

import mmlspark.contracts.SchemaUtils
import mmlspark.pixels.ImageSchemaUtils
import org.apache.spark.sql.types._

/** What ImageLIME and ImageSHAP share: the image column, the superpixels' settings and column, and
  * their checks before any job.
  */
private[explainers] trait ImageExplainerParams
    extends ExplainerParams
    with ImageExplainerParamsDecls {

  setDefault(cellSize -> 16.0, modifier -> 130.0, superpixelCol -> "superpixels")

  protected def checkImageSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(inputCol), ExplainerMessages.NoImageCol())
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ExplainerMessages.ImageInput())(t =>
      t == BinaryType || ImageSchemaUtils.isImage(t)
    )
    val common = checkCommon(schema)
    SchemaUtils.requireAbsent(this, schema, $(superpixelCol))
    SchemaUtils.requireDistinct(
      this,
      "outputCol, metricsCol and superpixelCol",
      Seq($(outputCol), $(metricsCol), $(superpixelCol))
    )
    common.add(StructField($(superpixelCol), ImageExplaining.superpixelType))
  }
}
