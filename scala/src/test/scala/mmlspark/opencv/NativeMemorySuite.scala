package mmlspark.opencv

import scala.io.Source

import mmlspark.image.{ImageCodec, ImageFixtures, ImageSchemaUtils}
import org.apache.spark.sql.Row
import org.opencv.core.{CvType, Mat}
import org.scalatest.funsuite.AnyFunSuite

/** Decoding and transforming thousands of images in one JVM leaves resident memory flat: every Mat
  * on the way is released when its row is done, not left to the garbage collector.
  */
class NativeMemorySuite extends AnyFunSuite {

  private def residentKiB(): Long = {
    val status = Source.fromFile("/proc/self/status")
    try status.getLines().find(_.startsWith("VmRSS:")).map(_.split("\\s+")(1).toLong).getOrElse(-1L)
    finally status.close()
  }

  test("4000 decode + transform calls keep resident memory flat") {
    OpenCV.ensureLoaded()
    val source = new Mat(256, 256, CvType.CV_8UC3)
    val png =
      try {
        org.opencv.core.Core.randu(source, 0, 255)
        ImageFixtures.encode(source, ".png")
      } finally source.release()
    val ops = new ImageTransformer()
      .resize(300, 300)
      .centerCrop(224, 224)
      .flip(1)
      .colorFormat("RGB")
      .normalize(Array(0.5), Array(0.25), 1.0 / 255)
      .getOps
    def once(): Int = {
      val mat = ImageCodec.decode(png, "color", applyOrientation = true, reduceFactor = 1)
      val struct =
        try ImageSchemaUtils.toStruct(mat, "x")
        finally mat.release()
      val row =
        Row(struct.origin, struct.height, struct.width, struct.nChannels, struct.mode, struct.data)
      ImageTransformer.run(ops)(row, image => ImageTransformer.toCHW(image, "RGB")).length
    }
    // Resident memory minus the Java heap the JVM has committed: what native code holds.
    def nativeMiB(): Double = {
      System.gc()
      (residentKiB() * 1024.0 - Runtime.getRuntime.totalMemory()) / (1024 * 1024)
    }
    (0 until 1000).foreach(_ => once()) // warm up: JIT, OpenCV's buffer pools, allocator arenas
    val start = nativeMiB()
    val middle = { (0 until 2000).foreach(_ => assert(once() == 3 * 224 * 224)); nativeMiB() }
    val end = { (0 until 2000).foreach(_ => assert(once() == 3 * 224 * 224)); nativeMiB() }
    info(
      f"native resident memory: $start%.1f MiB after warm-up, $middle%.1f after 2000 more calls, $end%.1f after 4000"
    )
    // Each call makes about 1.5 MB of native Mats: leaking them would add about 3 GB per 2000 calls.
    assert(
      end - middle < 48,
      f"native memory grew by ${end - middle}%.1f MiB over the last 2000 calls"
    )
    assert(end - start < 96, f"native memory grew by ${end - start}%.1f MiB over 4000 calls")
  }
}
