package mmlspark.apps.cameratrap

import java.time.LocalDateTime
import java.time.ZoneOffset
import java.time.format.DateTimeFormatter

import scala.util.Try

import mmlspark.image.ImageReader
import mmlspark.pixels.{Exif, ImageCodec}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.util.SerializableConfiguration

/** When camera-trap photos were taken, from their EXIF DateTimeOriginal: copying a survey resets
  * file times, so bursts are told by the time the camera wrote.
  */
object TakenTimes {

  /** EXIF lives in the JPEG's APP1 segment, at most 64 KiB, near the start of the file. */
  val HeadBytes: Int = 128 << 10

  private val format = DateTimeFormatter.ofPattern("yyyy:MM:dd HH:mm:ss")

  /** DateTimeOriginal of a JPEG head as seconds, reading the camera's local time as if UTC (only
    * differences between photos matter); None without a valid one.
    */
  def seconds(head: Array[Byte]): Option[Double] =
    if (head == null || !ImageCodec.isJpeg(head)) None
    else
      Exif
        .dateTimeOriginal(head)
        .flatMap(text => Try(LocalDateTime.parse(text, format)).toOption)
        .map(_.toEpochSecond(ZoneOffset.UTC).toDouble)

  /** `files` (a listing with `path`) with `outCol`: each photo's EXIF time in seconds, or null (not
    * a JPEG, no DateTimeOriginal, unreadable). Files are read in the tasks, their first
    * [[HeadBytes]] only.
    */
  def add(files: DataFrame, outCol: String): DataFrame = {
    val spark = files.sparkSession
    val conf = spark.sparkContext.broadcast(
      new SerializableConfiguration(spark.sessionState.newHadoopConf())
    )
    val taken = udf { (path: String) =>
      Try(seconds(ImageReader.readHead(path, conf.value, HeadBytes))).toOption.flatten
    }
    files.withColumn(outCol, taken(col("path")))
  }
}
