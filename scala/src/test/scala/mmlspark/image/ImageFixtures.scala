package mmlspark.image

import mmlspark.contracts.SparkTestSession
import mmlspark.pixels.OpenCV
import org.apache.spark.sql.DataFrame
import org.opencv.core.{CvType, Mat, MatOfByte}
import org.opencv.imgcodecs.Imgcodecs

/** Small images made in code. The pixel pattern is a formula, so expected values are computed here,
  * independently of the code under test.
  */
object ImageFixtures {

  val height = 6
  val width = 8

  /** Sample of channel `c` (BGR order) at row `y`, column `x`. */
  def pixel(y: Int, x: Int, c: Int): Int = (y * 37 + x * 11 + c * 80) % 256

  def patternMat(): Mat = {
    OpenCV.ensureLoaded()
    val mat = new Mat(height, width, CvType.CV_8UC3)
    val data = Array.tabulate(height * width * 3) { i =>
      val (p, c) = (i / 3, i % 3)
      pixel(p / width, p % width, c).toByte
    }
    mat.put(0, 0, data)
    mat
  }

  def encode(mat: Mat, ext: String): Array[Byte] = {
    val buffer = new MatOfByte()
    try {
      require(Imgcodecs.imencode(ext, mat, buffer))
      buffer.toArray
    } finally buffer.release()
  }

  lazy val png: Array[Byte] = {
    val mat = patternMat()
    try encode(mat, ".png")
    finally mat.release()
  }

  /** Rows of (path, content): a PNG of the pattern, garbage, an empty file. */
  def files: DataFrame = {
    import SparkTestSession.spark.implicits._
    Seq(
      ("pattern.png", png),
      ("notes.jpg", "not an image at all".getBytes("UTF-8")),
      ("empty.jpg", Array.emptyByteArray)
    ).toDF("path", "content")
  }

  def images: DataFrame =
    new ImageDecoder().setOriginCol("path").transform(files).drop("content")

  /** The pattern's samples, BGR interleaved, row-major. */
  def expectedBytes(
      transform: (Int, Int) => (Int, Int) = (y, x) => (y, x),
      h: Int = height,
      w: Int = width
  ): Seq[Int] =
    for (y <- 0 until h; x <- 0 until w; c <- 0 until 3) yield {
      val (sy, sx) = transform(y, x)
      pixel(sy, sx, c)
    }
}
