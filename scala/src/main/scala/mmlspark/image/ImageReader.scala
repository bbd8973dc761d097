package mmlspark.image

import mmlspark.contracts.RowResults
import mmlspark.pixels.{DeferredDecode, ImageFiles}
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.functions.col

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
    readFiles(sampled, decoder).select("path", "image", "error")
  }

  /** Reads and decodes the files of a [[FileListing]] DataFrame (columns `path`, `length`,
    * `modificationTime`, `error`), with `decoder`'s params; its other columns are kept, `error`
    * becomes the listing's, the read's or the decode's error and `image` is added.
    *
    * With `deferDecode`, unless rows are dropped (`dropInvalid` needs every image), `image` is
    * marked as a decode a later `ImageTransformer` (or `ImageFeaturizer`) may run itself from
    * `path` ([[DeferredDecode]]): that stage then reads each file and decodes it at the smallest
    * size its first resize allows, and Spark runs this decode only if `image` or `error` is read
    * afterwards.
    */
  def readFiles(files: DataFrame, decoder: ImageDecoder, deferDecode: Boolean = true): DataFrame = {
    val spark = files.sparkSession
    val conf = ImageFiles.hadoopConf(spark)
    val tmp = s"__listing_error_${decoder.uid}"
    val result = decoder.decodeFilesColumn(col("path"), col(tmp), conf)
    val read =
      RowResults.expand(files.withColumnRenamed("error", tmp), decoder, result, "image", "error")
    val kept = read.drop(tmp)
    if (decoder.getDropInvalid) kept.filter(col("image").isNotNull)
    else if (!deferDecode) kept
    else {
      val source = DeferredDecode(
        "path",
        fromPath = true,
        "path",
        decoder.uid,
        decoder.getColorMode,
        decoder.getApplyOrientation,
        decoder.getReduceFactor,
        decoder.getMinHeight,
        decoder.getMinWidth
      )
      kept
        .withMetadata("path", source.sourceMetadata(kept.schema("path").metadata))
        .withMetadata("image", source.imageMetadata)
    }
  }

  /** The name the reader's decode has in query plans. */
  val DecodeUdfName = "read_image_file"

  /** Bytes of encoded images one task reads, when files are grouped into partitions. */
  val targetPartitionBytes: Long = 64L << 20
}
