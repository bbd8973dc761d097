package mmlspark.pixels

import java.io.ByteArrayInputStream
import java.awt.image.{BufferedImage, IndexColorModel}
import javax.imageio.ImageIO
import javax.imageio.stream.ImageInputStream

import org.opencv.core.{CvType, Mat}
import org.opencv.imgproc.Imgproc

/** Reduced decoding of formats without JPEG's DCT scaling (PNG, TIFF, BMP, GIF): Java's image
  * readers decode row by row (or tile by tile) and keep every `step`-th pixel of every `step`-th
  * row, so memory follows the reduced size, not the stored one. Used only for an image whose full
  * size is over the pixel limit while a smaller one is all the stage needs; images under the limit
  * keep OpenCV's decoding, so results do not change with this path.
  */
private[mmlspark] object SubsampledDecode {

  /** Formats Java's bundled image readers decode with source subsampling. */
  val Formats: Set[String] = Set("png", "tiff", "bmp", "gif")

  /** The largest step whose subsampled size still covers `minHeight` x `minWidth`. */
  def step(header: ImageHeader, minHeight: Int, minWidth: Int): Int = {
    def fits(s: Int) =
      ceilDiv(header.width, s) >= minWidth && ceilDiv(header.height, s) >= minHeight
    var s = 1
    while (fits(s + 1) && s + 1 <= math.max(header.width, header.height)) s += 1
    s
  }

  def pixels(header: ImageHeader, step: Int): Long =
    ceilDiv(header.width, step).toLong * ceilDiv(header.height, step)

  /** Decodes `bytes` keeping every `step`-th pixel, into an 8-bit BGR (`color`) or gray Mat the
    * caller releases. Alpha is dropped and 16-bit samples are reduced to 8 bits, as OpenCV's
    * `IMREAD_COLOR` does.
    */
  def decode(bytes: Array[Byte], colorMode: String, step: Int): Mat = {
    val input: ImageInputStream = ImageIO.createImageInputStream(new ByteArrayInputStream(bytes))
    val image =
      try {
        val readers = ImageIO.getImageReaders(input)
        if (!readers.hasNext) throw new UndecodableImageException("no reader for this format")
        val reader = readers.next()
        try {
          reader.setInput(input, true, true)
          val param = reader.getDefaultReadParam
          param.setSourceSubsampling(step, step, 0, 0)
          reader.read(0, param)
        } finally reader.dispose()
      } catch {
        case e: UndecodableImageException => throw e
        case e: java.io.IOException =>
          throw new UndecodableImageException(s"not a decodable image: ${e.getMessage}")
        case e: RuntimeException =>
          throw new UndecodableImageException(s"not a decodable image: $e")
      } finally input.close()
    val bgr = toBgr(image)
    if (colorMode == "grayscale") {
      val gray = new Mat()
      Imgproc.cvtColor(bgr, gray, Imgproc.COLOR_BGR2GRAY)
      bgr.release()
      gray
    } else bgr
  }

  private def toBgr(image: BufferedImage): Mat = {
    val (width, height) = (image.getWidth, image.getHeight)
    val out = new Array[Byte](width * height * 3)
    val raster = image.getRaster
    val bands = raster.getNumBands
    val direct = !image.getColorModel.isInstanceOf[IndexColorModel] && bands <= 4
    if (direct) {
      val bits = image.getColorModel.getComponentSize(0)
      val shift = math.max(0, bits - 8)
      val row = new Array[Int](width * bands)
      for (y <- 0 until height) {
        raster.getPixels(0, y, width, 1, row)
        var x = 0
        while (x < width) {
          val p = x * bands
          val o = (y * width + x) * 3
          if (bands >= 3) {
            out(o) = (row(p + 2) >> shift).toByte
            out(o + 1) = (row(p + 1) >> shift).toByte
            out(o + 2) = (row(p) >> shift).toByte
          } else {
            val v = (row(p) >> shift).toByte
            out(o) = v; out(o + 1) = v; out(o + 2) = v
          }
          x += 1
        }
      }
    } else {
      val row = new Array[Int](width)
      for (y <- 0 until height) {
        image.getRGB(0, y, width, 1, row, 0, width)
        var x = 0
        while (x < width) {
          val o = (y * width + x) * 3
          out(o) = row(x).toByte
          out(o + 1) = (row(x) >> 8).toByte
          out(o + 2) = (row(x) >> 16).toByte
          x += 1
        }
      }
    }
    val mat = new Mat(height, width, CvType.CV_8UC3)
    mat.put(0, 0, out)
    mat
  }

  private def ceilDiv(a: Int, b: Int): Int = (a + b - 1) / b
}
