package mmlspark.image

import java.io.IOException
import java.nio.file.{Files, Paths}

import scala.util.control.NonFatal

import mmlspark.contracts.{RowResults, SchemaUtils}
import mmlspark.pixels.{ImageLimits, UndecodableImageException}
import org.apache.hadoop.fs.Path
import org.apache.hadoop.io.IOUtils
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.functions.{col, udf}
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
    readFiles(sampled, decoder).select("path", "image", "error")
  }

  /** Reads and decodes the files of a [[FileListing]] DataFrame (columns `path`, `length`,
    * `modificationTime`, `error`), with `decoder`'s params; its other columns are kept, `error`
    * becomes the listing's, the read's or the decode's error and `image` is added.
    */
  def readFiles(files: DataFrame, decoder: ImageDecoder): DataFrame = {
    val spark = files.sparkSession
    val conf = spark.sparkContext.broadcast(
      new SerializableConfiguration(spark.sessionState.newHadoopConf())
    )
    val tmp = s"__listing_error_${decoder.uid}"
    val result = decoder.decodeFilesColumn(col("path"), col(tmp), conf)
    val read =
      RowResults.expand(files.withColumnRenamed("error", tmp), decoder, result, "image", "error")
    val kept = read.drop(tmp)
    if (decoder.getDropInvalid) kept.filter(col("image").isNotNull) else kept
  }

  /** The bytes of one file, refused (before reading) when over `maxBytes`. */
  def readBytes(path: String, conf: SerializableConfiguration, maxBytes: Long): Array[Byte] = {
    val hadoopPath = new Path(path)
    val fs = hadoopPath.getFileSystem(conf.value)
    def tooLarge(length: Long) = new UndecodableImageException(
      s"file is ${ImageLimits.megabytes(length)}, over the limit of " +
        s"${ImageLimits.megabytes(maxBytes)} per file on this executor; raise " +
        ImageLimits.MaxFileBytesKey
    )
    try {
      if (fs.getScheme == "file") {
        val file = Paths.get(hadoopPath.toUri)
        val length = Files.size(file)
        if (length > maxBytes) throw tooLarge(length)
        Files.readAllBytes(file)
      } else {
        val length = fs.getFileStatus(hadoopPath).getLen
        if (length > maxBytes) throw tooLarge(length)
        val bytes = new Array[Byte](Math.toIntExact(length))
        val in = fs.open(hadoopPath)
        try IOUtils.readFully(in, bytes, 0, bytes.length)
        finally in.close()
        bytes
      }
    } catch {
      case e: IOException =>
        throw new UndecodableImageException(s"cannot read the file: ${FileListing.reason(e)}")
    }
  }

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
