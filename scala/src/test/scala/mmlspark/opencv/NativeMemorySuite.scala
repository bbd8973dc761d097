package mmlspark.opencv

import scala.io.Source
import scala.jdk.CollectionConverters._

import mmlspark.image.ImageFixtures
import mmlspark.pixels.{ImageCodec, ImageSchemaUtils, OpenCV}
import org.apache.spark.sql.Row
import org.opencv.core.{Core, CvType, Mat}
import org.scalatest.funsuite.AnyFunSuite

/** Decoding and transforming thousands of images in one JVM leaves resident memory flat: every Mat
  * on the way is released when its row is done. The calls run in a JVM of their own whose heap is
  * fixed and touched up front, so resident memory moves only with native memory.
  */
class NativeMemorySuite extends AnyFunSuite {

  test("6000 decode + transform calls keep resident memory flat") {
    val java = s"${sys.props("java.home")}/bin/java"
    val command = Seq(
      java,
      "-Xms384m",
      "-Xmx384m",
      "-XX:+AlwaysPreTouch",
      "-XX:+UseSerialGC",
      "-cp",
      sys.props("java.class.path"),
      NativeMemoryProbe.getClass.getName.stripSuffix("$")
    )
    val process = new ProcessBuilder(command.asJava).redirectErrorStream(true).start()
    val output = Source.fromInputStream(process.getInputStream).getLines().toList
    assert(process.waitFor() == 0, output.mkString("\n"))
    val resident = output.filter(_.startsWith("rss-mib ")).map(_.stripPrefix("rss-mib ").toDouble)
    assert(resident.length == 3, output.mkString("\n"))
    val Seq(warm, middle, end) = resident
    info(
      f"resident memory: $warm%.1f MiB after 1000 warm-up calls, $middle%.1f after 3000 more, $end%.1f after 6000"
    )
    // Each call makes about 1.5 MB of native Mats: leaking them would add gigabytes.
    assert(
      end - middle < 32,
      f"resident memory grew by ${end - middle}%.1f MiB over the last 3000 calls"
    )
    assert(end - warm < 64, f"resident memory grew by ${end - warm}%.1f MiB over 6000 calls")
  }
}

/** The measured loop, run as the main of a separate JVM; prints resident memory per phase. */
object NativeMemoryProbe {

  private def residentMiB(): Double = {
    val status = Source.fromFile("/proc/self/status")
    try status.getLines().find(_.startsWith("VmRSS:")).map(_.split("\\s+")(1).toDouble / 1024).get
    finally status.close()
  }

  def main(args: Array[String]): Unit = {
    OpenCV.ensureLoaded()
    val source = new Mat(256, 256, CvType.CV_8UC3)
    val png =
      try {
        Core.randu(source, 0, 255)
        ImageFixtures.encode(source, ".png")
      } finally source.release()
    val ops = new ImageTransformer()
      .resize(300, 300)
      .centerCrop(224, 224)
      .flip(1)
      .colorFormat("RGB")
      .normalize(Array(0.5), Array(0.25), 1.0 / 255)
      .getOps
    def once(): Unit = {
      val mat = ImageCodec.decode(png, "color", applyOrientation = true, reduceFactor = 1)
      val struct =
        try ImageSchemaUtils.toStruct(mat, "x")
        finally mat.release()
      val row =
        Row(struct.origin, struct.height, struct.width, struct.nChannels, struct.mode, struct.data)
      val tensor = ImageTransformer.run(ops)(row, image => ImageTransformer.toCHW(image, "RGB"))
      require(tensor.length == 3 * 224 * 224)
    }
    (0 until 1000).foreach(_ => once())
    println(f"rss-mib ${residentMiB()}%.1f")
    (0 until 3000).foreach(_ => once())
    println(f"rss-mib ${residentMiB()}%.1f")
    (0 until 3000).foreach(_ => once())
    println(f"rss-mib ${residentMiB()}%.1f")
  }
}
