package mmlspark.contracts

import java.nio.file.Files

import org.apache.spark.sql.SparkSession

/** One small local SparkSession for every suite in the test JVM: two cores, two shuffle partitions,
  * no UI.
  */
object SparkTestSession {
  lazy val spark: SparkSession = SparkSession
    .builder()
    .master("local[2]")
    .appName("mmlspark-tests")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.warehouse.dir", Files.createTempDirectory("mmlspark-warehouse").toString)
    .getOrCreate()

  def tempDir(prefix: String): String = {
    val dir = Files.createTempDirectory(prefix).toFile
    dir.deleteOnExit()
    dir.getPath
  }
}
