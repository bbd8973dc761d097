package mmlspark.pixels

import scala.util.Try

import org.apache.spark.ml.mmlspark.SparkInternals

/** How much one image may take of an executor's memory (contract 3: memory per row is bounded
  * before it is allocated).
  *
  * A decoded image is held several times over while it moves through a row: the decoder's native
  * Mat, its copy on the heap, Spark's row buffers, and the next stage's copy. The defaults give
  * each task slot an equal share of 60% of the heap and assume [[BytesPerPixel]] heap bytes per
  * decoded pixel, so that every slot can hold an image at the limit at the same time. Settings
  * raise them: `spark.mmlspark.image.maxPixels` (decoded pixels per image) and
  * `spark.mmlspark.image.maxFileBytes` (encoded bytes per file).
  */
object ImageLimits {

  val MaxPixelsKey = "spark.mmlspark.image.maxPixels"
  val MaxFileBytesKey = "spark.mmlspark.image.maxFileBytes"

  /** Heap bytes one decoded 8-bit 3-channel pixel may cost in a task: its byte array, the row
    * buffers of the projections it passes (which grow by doubling and are kept for the partition)
    * and the next stage's copy. Measured: two tasks of 24 MP photos through `read_images`,
    * `ImageTransformer` and `ONNXModel` sometimes fit a 1 GiB heap and sometimes do not, about 21
    * bytes a pixel; 30 leaves a margin.
    */
  val BytesPerPixel: Long = 30L

  /** Heap available to one task slot of this JVM. */
  def slotBudget: Long = (Runtime.getRuntime.maxMemory * 0.6 / SparkInternals.taskSlots).toLong

  /** Decoded pixels one image may have on this executor. */
  def maxPixels: Long = setting(MaxPixelsKey).getOrElse(slotBudget / BytesPerPixel)

  /** Bytes one encoded file may have on this executor (it is held about four times too). */
  def maxFileBytes: Long =
    math.min(setting(MaxFileBytesKey).getOrElse(slotBudget / 4), Int.MaxValue - 16L)

  private def setting(key: String): Option[Long] =
    SparkInternals.executorConf.flatMap(_.getOption(key)).map { v =>
      Try(v.trim.toLong).filter(_ > 0).getOrElse {
        throw new IllegalArgumentException(s"$key must be a positive whole number, not '$v'")
      }
    }

  def megapixels(pixels: Long): String = mmlspark.contracts.RowMessage.megapixels(pixels)

  def megabytes(bytes: Long): String = mmlspark.contracts.RowMessage.megabytes(bytes)
}
