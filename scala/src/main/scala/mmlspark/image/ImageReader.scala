package mmlspark.image

import scala.util.control.NonFatal

import mmlspark.contracts.{Deferred, DeferredColumns, RowResults, SchemaUtils}
import mmlspark.pixels.{ImageFiles, ImageLimits, ImageRead, ReadSettings, UndecodableImageException}
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.sql.types.Metadata
import org.apache.spark.util.SerializableConfiguration

/** Reads image files into a DataFrame of `path`, `image` (Spark's image struct) and `error`. Files
  * are listed on the driver by [[FileListing]] (every file, broken link, unlistable folder and link
  * loop gives one row) and read and decoded by the tasks, never on the driver. A file that cannot
  * be read (permission denied, removed, over the size limit) or decoded keeps its row with a null
  * image and the reason in `error`; it is dropped only with `dropInvalid`.
  */
object ImageReader {

  def read(
      spark: SparkSession,
      path: String,
      recursive: Boolean = true,
      pathGlobFilter: String = null,
      sampleRatio: Double = 1.0,
      seed: Long = 0L,
      colorMode: String = "color",
      applyOrientation: Boolean = true,
      reduceFactor: Int = 1,
      dropInvalid: Boolean = false,
      minHeight: Int = 0,
      minWidth: Int = 0
  ): DataFrame = {
    require(
      sampleRatio > 0.0 && sampleRatio <= 1.0,
      s"read_images: sampleRatio must be in (0, 1] but was $sampleRatio"
    )
    val listing = FileListing.listDataFrame(spark, path, recursive, pathGlobFilter)
    val sampled =
      if (sampleRatio < 1.0) listing.sample(withReplacement = false, sampleRatio, seed) else listing
    val decoder = new ImageDecoder()
      .setColorMode(colorMode)
      .setApplyOrientation(applyOrientation)
      .setReduceFactor(reduceFactor)
      .setMinHeight(minHeight)
      .setMinWidth(minWidth)
      .setDropInvalid(dropInvalid)
    // The listing, then the decode as a deferred step: an ImageTransformer on `image` can decode
    // each file itself, at the size it needs, and later stages leave `image` to be computed only
    // where it is read.
    val settings = ReadSettings(colorMode, applyOrientation, reduceFactor, minHeight, minWidth)
    val conf = ImageFiles.hadoopConf(spark)
    val listingError = s"__listing_error_${decoder.uid}"
    val base = sampled.select(col("path"), col("error").as(listingError))
    val restore = decodeFiles(decoder, conf, listingError, settings.toMetadata) _
    val order = Seq("path", "image", "error")
    val read = restore(base).select(order.map(col): _*)
    if (dropInvalid) read.filter(col("image").isNotNull)
    else {
      val image = (df: DataFrame) =>
        df.withColumn(
          "image",
          decoder
            .decodeFilesColumn(col("path"), col(listingError), conf)("value")
            .as("image", settings.toMetadata)
        )
      DeferredColumns.register(
        read,
        Deferred(
          base,
          Set("image", "error"),
          restore,
          order,
          Some(ImageRead(settings, listingError, conf, image))
        )
      )
    }
  }

  /** Reads and decodes the files of a [[FileListing]] DataFrame (columns `path`, `length`,
    * `modificationTime`, `error`), with `decoder`'s params; its other columns are kept, `error`
    * becomes the listing's, the read's or the decode's error and `image` is added.
    */
  def readFiles(files: DataFrame, decoder: ImageDecoder): DataFrame = {
    val tmp = s"__listing_error_${decoder.uid}"
    val read = decodeFiles(decoder, ImageFiles.hadoopConf(files.sparkSession), tmp, Metadata.empty)(
      files.withColumnRenamed("error", tmp)
    )
    val kept = read.drop(tmp)
    if (decoder.getDropInvalid) kept.filter(col("image").isNotNull) else kept
  }

  /** `files` (with `path` and the listing's error in `listingError`) with `image` and `error`. */
  private def decodeFiles(
      decoder: ImageDecoder,
      conf: org.apache.spark.broadcast.Broadcast[SerializableConfiguration],
      listingError: String,
      metadata: Metadata
  )(files: DataFrame): DataFrame =
    RowResults.expand(
      files,
      decoder,
      decoder.decodeFilesColumn(col("path"), col(listingError), conf),
      "image",
      "error",
      metadata
    )

  /** Up to the first `maxBytes` bytes of a file (fewer for a shorter file). */
  def readHead(path: String, conf: SerializableConfiguration, maxBytes: Int): Array[Byte] = {
    val hadoopPath = new Path(path)
    val in = hadoopPath.getFileSystem(conf.value).open(hadoopPath)
    try {
      val buffer = new Array[Byte](maxBytes)
      var filled = 0
      var read = 0
      while (filled < maxBytes && read >= 0) {
        read = in.read(buffer, filled, maxBytes - filled)
        if (read > 0) filled += read
      }
      java.util.Arrays.copyOf(buffer, filled)
    } finally in.close()
  }

  /** Bytes of encoded images one task reads, when files are grouped into partitions. */
  val targetPartitionBytes: Long = 64L << 20
}
