package mmlspark.opencv

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import mmlspark.pixels.{ImageSchemaUtils, ImageStruct}
import scala.util.Try

import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row}
import org.apache.spark.sql.functions.{col, explode_outer, udf}
import org.apache.spark.sql.types.StructType
import org.opencv.core.{Core, Mat}

/** Adds flipped copies of each image as extra rows: every input row is repeated with `outputCol`
  * holding the original image, then its left-right mirror (`flipLeftRight`), then its upside-down
  * mirror (`flipUpDown`). A null or malformed image stays one row with a null output.
  *
  * It lived in `image` before it moved here, beside SynapseML's; stages saved under that name still
  * load (see `mmlspark.image.ImageSetAugmenter`).
  */
final class ImageSetAugmenter(override val uid: String)
    extends Transformer
    with ImageSetAugmenterDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("ImageSetAugmenter"))

  setDefault(
    inputCol -> "image",
    outputCol -> "augmented",
    flipLeftRight -> true,
    flipUpDown -> false
  )

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ImageSchemaUtils.ImageColumn)
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    schema.add($(outputCol), ImageSchemaUtils.imageType)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val codes = (if ($(flipLeftRight)) Seq(1) else Nil) ++ (if ($(flipUpDown)) Seq(0) else Nil)
    val augment = udf { (row: Row) =>
      val original = if (row == null) None else Try(ImageSchemaUtils.toMat(row)).toOption
      original.fold(Seq.empty[ImageStruct]) { original =>
        try {
          val flips = codes.map { code =>
            val flipped = new Mat()
            try {
              Core.flip(original, flipped, code)
              ImageSchemaUtils.toStruct(flipped, row.getString(0))
            } finally flipped.release()
          }
          ImageSchemaUtils.toStruct(original, row.getString(0)) +: flips
        } finally original.release()
      }
    }
    dataset.withColumn($(outputCol), explode_outer(augment(col(SchemaUtils.quoted($(inputCol))))))
  }

  override def copy(extra: ParamMap): ImageSetAugmenter = defaultCopy(extra)
}

object ImageSetAugmenter extends StageReadable[ImageSetAugmenter]
