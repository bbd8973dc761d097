package mmlspark.image

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.execution.datasources.{
  HadoopFsRelation,
  LogicalRelation,
  PartitioningAwareFileIndex
}

/** Reads image files into a DataFrame of `path`, `image` (Spark's image struct) and `error`. Files
  * are listed by Spark's `binaryFile` source and decoded by [[ImageDecoder]] in the tasks that read
  * them, never on the driver; every file gives one row unless `dropInvalid` is set (zero-length
  * files too, which Spark's file scan alone would skip).
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
      dropInvalid: Boolean = false
  ): DataFrame = {
    require(
      sampleRatio > 0.0 && sampleRatio <= 1.0,
      s"read_images: sampleRatio must be in (0, 1] but was $sampleRatio"
    )
    val reader = spark.read.format("binaryFile").option("recursiveFileLookup", recursive.toString)
    val listed =
      Option(pathGlobFilter).fold(reader)(g => reader.option("pathGlobFilter", g)).load(path)
    val listing = listedFiles(listed)
    // Spark's file scan makes no rows for zero-length files; they are images that failed too.
    val empty = listing.filter(_.getLen == 0).map(_.getPath.toString)
    val files =
      if (empty.isEmpty) listed.select("path", "content")
      else {
        import spark.implicits._
        listed
          .select("path", "content")
          .union(empty.map(p => (p, Array.emptyByteArray)).toDF("path", "content"))
      }
    val sampled =
      if (sampleRatio < 1.0) files.sample(withReplacement = false, sampleRatio, seed) else files
    // Spark charges each file 4 MB of "open cost" when planning, so photos of a few hundred KB
    // get a task each and task overhead dominates. Group them into partitions of about
    // `targetPartitionBytes`, with at least a few partitions per core.
    val partitions = math.max(
      spark.sparkContext.defaultParallelism * 4L,
      listing.map(_.getLen).sum / targetPartitionBytes + 1
    )
    // (Coalescing to more partitions than the scan has leaves it as it is.)
    val grouped = sampled.coalesce(Math.toIntExact(partitions))
    new ImageDecoder()
      .setInputCol("content")
      .setOriginCol("path")
      .setColorMode(colorMode)
      .setApplyOrientation(applyOrientation)
      .setReduceFactor(reduceFactor)
      .setDropInvalid(dropInvalid)
      .transform(grouped)
      .select("path", "image", "error")
  }

  /** Bytes of encoded images one task reads, when files are grouped into partitions. */
  val targetPartitionBytes: Long = 64L << 20

  /** The files a file-source DataFrame lists (already listed on the driver when the DataFrame was
    * made; nothing is read).
    */
  private def listedFiles(files: DataFrame): Seq[org.apache.hadoop.fs.FileStatus] =
    files.queryExecution.analyzed
      .collectFirst { case r: LogicalRelation => r.relation }
      .collect { case h: HadoopFsRelation => h.location }
      .collect { case index: PartitioningAwareFileIndex => index.allFiles() }
      .getOrElse(Nil)
}
