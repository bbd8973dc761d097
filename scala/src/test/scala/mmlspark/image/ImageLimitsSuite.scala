package mmlspark.image

import mmlspark.opencv.ImageTransformer
import mmlspark.pixels.{ImageCodec, ImageHeader, ImageLimits, OpenCV, UndecodableImageException}
import org.opencv.core.{CvType, Mat, MatOfInt, Scalar}
import org.opencv.imgcodecs.Imgcodecs
import org.scalatest.funsuite.AnyFunSuite

/** Memory is bounded before it is allocated: sizes come from headers, and anything over the pixel
  * limit is a row error that names the size and the limit.
  */
class ImageLimitsSuite extends AnyFunSuite {

  private def encoded(height: Int, width: Int, ext: String, params: Int*): Array[Byte] = {
    OpenCV.ensureLoaded()
    val mat = new Mat(height, width, CvType.CV_8UC3, new Scalar(10, 200, 30))
    val buffer = new org.opencv.core.MatOfByte()
    try {
      assert(Imgcodecs.imencode(ext, mat, buffer, new MatOfInt(params: _*)))
      buffer.toArray
    } finally {
      mat.release()
      buffer.release()
    }
  }

  test("the header gives each format's size, as OpenCV encoded it") {
    val (height, width) = (37, 53)
    for (
      (ext, format, scalable) <- Seq(
        (".jpg", "jpeg", true),
        (".png", "png", false),
        (".bmp", "bmp", false),
        (".tiff", "tiff", false),
        (".webp", "webp", false),
        (".ppm", "pnm", false)
      )
    ) {
      val header = ImageHeader.read(encoded(height, width, ext))
      assert(header.contains(ImageHeader(format, width, height, scalable)), ext)
    }
    val lossless =
      ImageHeader.read(encoded(height, width, ".webp", Imgcodecs.IMWRITE_WEBP_QUALITY, 101))
    assert(lossless.contains(ImageHeader("webp", width, height, scalable = false)))
    val progressive = ImageHeader.read(
      encoded(height, width, ".jpg", Imgcodecs.IMWRITE_JPEG_PROGRESSIVE, 1)
    )
    assert(progressive.contains(ImageHeader("jpeg", width, height, scalable = true)))
    assert(ImageHeader.read("not an image at all".getBytes).isEmpty)
    assert(ImageHeader.read(encoded(height, width, ".png").take(12)).isEmpty) // cut short
  }

  /** A valid JPEG whose frame header claims `height` x `width`. */
  private def claiming(height: Int, width: Int): Array[Byte] = {
    val bytes = encoded(16, 16, ".jpg")
    val sof = bytes.indices.find(i => bytes(i) == 0xff.toByte && bytes(i + 1) == 0xc0.toByte).get
    bytes(sof + 5) = (height >> 8).toByte
    bytes(sof + 6) = height.toByte
    bytes(sof + 7) = (width >> 8).toByte
    bytes(sof + 8) = width.toByte
    bytes
  }

  test("an image over the limit is refused from its header, naming its size and the limit") {
    val bomb = claiming(25000, 25000)
    assert(bomb.length < 1000)
    val refused = intercept[UndecodableImageException] {
      ImageCodec.decode(bomb, "color", applyOrientation = true, 1, maxPixels = 20000000L)
    }
    assert(refused.getMessage.contains("image is 25000x25000 (625.0 MP)"), refused.getMessage)
    assert(refused.getMessage.contains("over the limit of 20.0 MP"), refused.getMessage)
    assert(refused.getMessage.contains(ImageLimits.MaxPixelsKey), refused.getMessage)
  }

  test("a JPEG whose image data is too short for its frame is refused, though libjpeg takes it") {
    // 25000x25000 in 4:2:0 is 1563 x 1563 MCUs of 6 blocks, at least a bit each: 1.8 MB at least
    val bomb = claiming(25000, 25000)
    val refused = intercept[UndecodableImageException] {
      ImageCodec.decode(bomb, "color", true, 1, 224, 224, maxPixels = 20000000L) // 1/8: 9.8 MP
    }
    assert(refused.getMessage.startsWith("corrupt JPEG: "), refused.getMessage)
    assert(refused.getMessage.contains(s"${1563L * 1563 * 6} 8x8 blocks"), refused.getMessage)
    // A real photo of that frame size is not: its data is long enough.
    val photo = encoded(3000, 4000, ".jpg")
    assert(ImageHeader.jpegDataShortfall(photo).isEmpty)
  }

  test("a minimum size picks the smallest JPEG scale that still covers it") {
    val photo = encoded(3000, 4000, ".jpg")
    def decodedSize(minHeight: Int, minWidth: Int, maxPixels: Long = Long.MaxValue): (Int, Int) = {
      val mat = ImageCodec.decode(photo, "color", true, 1, minHeight, minWidth, maxPixels)
      try (mat.rows(), mat.cols())
      finally mat.release()
    }
    assert(decodedSize(224, 224) == (375, 500)) // 1/8
    assert(decodedSize(400, 224) == (750, 1000)) // 1/4: 1/8 would give 375 rows
    assert(decodedSize(1600, 10) == (3000, 4000)) // full: 1/2 would give 1500 rows
    assert(decodedSize(0, 0) == (3000, 4000))
    // Over the limit at full size, under it at the reduced scale: decoded, not refused.
    assert(decodedSize(224, 224, maxPixels = 1000000L) == (375, 500))
    val refused = intercept[UndecodableImageException](decodedSize(0, 0, maxPixels = 1000000L))
    assert(refused.getMessage.contains("image is 4000x3000 (12.0 MP)"), refused.getMessage)
  }

  test(
    "a PNG or TIFF over the limit is read subsampled when a smaller size is all that is needed"
  ) {
    OpenCV.ensureLoaded()
    val (height, width) = (2000, 3000)
    val pixels = new Array[Byte](height * width * 3)
    for (y <- 0 until height; x <- 0 until width) {
      val o = (y * width + x) * 3
      pixels(o) = ((x * 7 + y * 3) % 256).toByte
      pixels(o + 1) = ((x * x + y) % 256).toByte
      pixels(o + 2) = ((y * 5) % 251).toByte
    }
    val source = new Mat(height, width, CvType.CV_8UC3)
    source.put(0, 0, pixels)
    for (ext <- Seq(".png", ".tiff")) {
      val buffer = new org.opencv.core.MatOfByte()
      assert(Imgcodecs.imencode(ext, source, buffer))
      val bytes = buffer.toArray
      buffer.release()
      // 224 x 224 is covered by every 8th pixel (250 x 375), not by every 9th (223 rows).
      val reduced = ImageCodec.decode(bytes, "color", true, 1, 224, 224, maxPixels = 1000000L)
      assert((reduced.rows(), reduced.cols()) == (250, 375), ext)
      val got = new Array[Byte](250 * 375 * 3)
      reduced.get(0, 0, got)
      reduced.release()
      val expected =
        for (y <- 0 until 250; x <- 0 until 375; c <- 0 until 3)
          yield pixels((y * 8 * width + x * 8) * 3 + c)
      assert(got.toSeq == expected, ext)
      val gray = ImageCodec.decode(bytes, "grayscale", true, 1, 224, 224, maxPixels = 1000000L)
      assert((gray.rows(), gray.cols(), gray.channels()) == (250, 375, 1), ext)
      gray.release()
      // Under the limit the ordinary full decode runs; with no minimum size it is refused.
      val full = ImageCodec.decode(bytes, "color", true, 1, 224, 224)
      assert((full.rows(), full.cols()) == (height, width), ext)
      full.release()
      val refused = intercept[UndecodableImageException] {
        ImageCodec.decode(bytes, "color", true, 1, maxPixels = 1000000L)
      }
      assert(refused.getMessage.contains("image is 3000x2000"), refused.getMessage)
    }
    source.release()
  }

  test("the default limit gives each task slot an equal share of the heap") {
    val expected =
      (Runtime.getRuntime.maxMemory * 0.6 / org.apache.spark.ml.mmlspark.SparkInternals.taskSlots).toLong /
        ImageLimits.BytesPerPixel
    assert(ImageLimits.maxPixels == expected)
    assert(ImageLimits.maxFileBytes <= Int.MaxValue)
  }

  test("a resize past the pixel limit is a row error, not an allocation") {
    val huge = new ImageTransformer()
      .setInputCol("image")
      .setOutputCol("out")
      .resize(100000, 100000)
      .resize(4, 4)
      .transform(ImageFixtures.images)
      .select("out", "transformError")
      .collect()
    assert(huge.nonEmpty && huge.forall(_.isNullAt(0)))
    val message = huge.head.getString(1)
    assert(message.contains("resize would make a 100000x100000 image (10000.0 MP)"), message)
    assert(message.contains(ImageLimits.MaxPixelsKey), message)
  }
}
