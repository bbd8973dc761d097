package mmlspark.contracts

import org.apache.spark.sql.SparkSession

import mmlspark.onnx.TempFiles

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
    .config("spark.sql.warehouse.dir", TempFiles.createDir("mmlspark-warehouse").toString)
    .getOrCreate()

  /** A new temporary directory, deleted with what the test wrote into it when the JVM exits. */
  def tempDir(prefix: String): String = TempFiles.createDir(prefix).getPath
}
