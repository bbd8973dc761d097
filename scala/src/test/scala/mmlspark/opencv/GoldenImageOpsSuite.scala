package mmlspark.opencv

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest

import scala.io.Source

import mmlspark.pixels.{ImageCodec, OpenCV, UndecodableImageException}
import org.json4s._
import org.json4s.jackson.JsonMethods.{compact, parse, render}
import org.opencv.core.{CvType, Mat}
import org.scalatest.funsuite.AnyFunSuite

/** The golden cases of the image operations and decodes (`golden/image_ops.json`), which the Python
  * suite (`tests/test_golden.py`) reads too and proves against opencv-python and numpy: the JVM
  * engine refuses each refused operation and undecodable file with its message and gives each pixel
  * case's output bytes.
  */
class GoldenImageOpsSuite extends AnyFunSuite {

  private implicit val formats: Formats = DefaultFormats

  private lazy val cases: JValue = {
    val source = Source.fromResource("golden/image_ops.json")(scala.io.Codec(UTF_8))
    try parse(source.mkString)
    finally source.close()
  }

  /** The input of every pixel case: BGR, (7y + 13x + 29c) mod 256. */
  private def input(height: Int, width: Int): Mat = {
    val bytes = new Array[Byte](height * width * 3)
    for (y <- 0 until height; x <- 0 until width; c <- 0 until 3)
      bytes((y * width + x) * 3 + c) = ((7 * y + 13 * x + 29 * c) % 256).toByte
    val mat = new Mat(height, width, CvType.CV_8UC3)
    mat.put(0, 0, bytes)
    mat
  }

  /** The pixels' bytes, row-major with interleaved channels (floats little-endian). */
  private def bytesOf(mat: Mat): (Array[Byte], String) = {
    val n = (mat.total() * mat.channels()).toInt
    CvType.depth(mat.`type`()) match {
      case CvType.CV_8U =>
        val out = new Array[Byte](n)
        mat.get(0, 0, out)
        (out, "uint8")
      case CvType.CV_32F =>
        val floats = new Array[Float](n)
        mat.get(0, 0, floats)
        val buffer = ByteBuffer.allocate(4 * n).order(ByteOrder.LITTLE_ENDIAN)
        floats.foreach(buffer.putFloat)
        (buffer.array(), "float32")
      case other => fail(s"no golden bytes for OpenCV depth $other")
    }
  }

  private def sha256(bytes: Array[Byte]): String =
    MessageDigest.getInstance("SHA-256").digest(bytes).map(b => f"${b & 0xff}%02x").mkString

  test("every refused case is refused with its golden message") {
    val refused = (cases \ "refused").children
    assert(refused.nonEmpty)
    refused.foreach { c =>
      val json = compact(render(c \ "operations"))
      val error = intercept[IllegalArgumentException](ImageOp.fromJson(json))
      assert(error.getMessage == (c \ "error").extract[String], json)
    }
  }

  test("every undecodable case gives its row the golden message") {
    val decode = (cases \ "decode").children
    assert(decode.nonEmpty)
    decode.foreach { c =>
      val bytes = java.util.Base64.getDecoder.decode((c \ "data").extract[String])
      val error = intercept[UndecodableImageException](
        ImageCodec.decode(
          bytes,
          (c \ "colorMode").extract[String],
          applyOrientation = true,
          (c \ "reduceFactor").extract[Int],
          (c \ "minHeight").extract[Int],
          (c \ "minWidth").extract[Int],
          (c \ "maxPixels").extract[Long]
        )
      )
      assert(error.getMessage == (c \ "error").extract[String])
    }
  }

  test("every pixel case gives the golden output bytes") {
    OpenCV.ensureLoaded()
    val List(height, width) = (cases \ "input").extract[List[Int]]
    val pixels = (cases \ "pixels").children
    assert(pixels.nonEmpty)
    pixels.foreach { c =>
      val json = compact(render(c \ "operations"))
      val out = ImageOp.fromJson(json).foldLeft(Image(input(height, width), "BGR")) { (image, op) =>
        val next = op(image)
        image.mat.release()
        next
      }
      val (bytes, dtype) = bytesOf(out.mat)
      val shape = List(out.mat.rows(), out.mat.cols(), out.mat.channels())
      assert(shape == (c \ "shape").extract[List[Int]], json)
      assert(dtype == (c \ "dtype").extract[String], json)
      assert(sha256(bytes) == (c \ "sha256").extract[String], json)
      out.mat.release()
    }
  }
}
