package mmlspark.pixels

import scala.util.Try

import mmlspark.contracts.{Deferred, DeferredColumns, SchemaUtils}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{Metadata, MetadataBuilder, StructField}
import org.apache.spark.util.SerializableConfiguration

/** How `read_images` decoded the files of its `image` column, recorded in that column's metadata
  * under [[ReadSettings.Key]]. With it, an `ImageTransformer` whose operations start with a resize
  * decodes each file again from the image's origin at the smallest JPEG scale the resize allows, as
  * it does on encoded bytes, so that `read_images` -> `ImageTransformer` gives the same result as
  * `binaryFile` -> `ImageTransformer` on every backend, cached or not.
  */
final case class ReadSettings(
    colorMode: String,
    applyOrientation: Boolean,
    reduceFactor: Int,
    minHeight: Int,
    minWidth: Int
) {

  /** The read decodes at full size, in a mode that has reduced JPEG decodes. */
  def fullSize: Boolean =
    reduceFactor == 1 && minHeight == 0 && minWidth == 0 && colorMode != "unchanged"

  /** (reduceFactor, minHeight, minWidth) for a stage that reads this read's files again: the
    * smallest JPEG scale covering `target` (height, width) where the read is at full size, else the
    * read's own.
    */
  def scaleFor(target: Option[(Int, Int)]): (Int, Int, Int) =
    target
      .filter(_ => fullSize)
      .map { case (h, w) => (1, h, w) }
      .getOrElse((reduceFactor, minHeight, minWidth))

  def toMetadata: Metadata = new MetadataBuilder()
    .putMetadata(
      ReadSettings.Key,
      new MetadataBuilder()
        .putString("colorMode", colorMode)
        .putBoolean("applyOrientation", applyOrientation)
        .putLong("reduceFactor", reduceFactor)
        .putLong("minHeight", minHeight)
        .putLong("minWidth", minWidth)
        .build()
    )
    .build()
}

object ReadSettings {

  val Key = "imageRead"

  /** The settings recorded on `field`, when `read_images` made it. */
  def of(field: StructField): Option[ReadSettings] =
    if (!field.metadata.contains(Key)) None
    else
      Try {
        val m = field.metadata.getMetadata(Key)
        ReadSettings(
          m.getString("colorMode"),
          m.getBoolean("applyOrientation"),
          m.getLong("reduceFactor").toInt,
          m.getLong("minHeight").toInt,
          m.getLong("minWidth").toInt
        )
      }.toOption
}

/** `read_images`' decode of each file: its settings, the hidden column with the listing's error,
  * the Hadoop configuration its tasks read files with and `image`, which adds the `image` column
  * alone (without `error`) to a DataFrame with `path` and the listing's error.
  */
final case class ImageRead(
    settings: ReadSettings,
    listingErrorCol: String,
    conf: Broadcast[SerializableConfiguration],
    image: DataFrame => DataFrame
) extends Deferred.Source {

  /** A stage's output on `d`, this read's own output, where the stage read the files itself: `base`
    * (`d`'s base with the stage's columns) with `image` still deferred, its columns `d`'s then
    * `added`.
    */
  def deferredOver(d: Deferred, base: DataFrame, added: Seq[String]): DataFrame = {
    val order = d.order ++ added
    val out = image(base).select(order.map(c => col(SchemaUtils.quoted(c))): _*)
    DeferredColumns.register(out, Deferred(base, Set("image"), image, order))
  }
}
