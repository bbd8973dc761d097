package mmlspark.pixels

import java.nio.{ByteBuffer, ByteOrder}

import org.scalatest.funsuite.AnyFunSuite

/** EXIF tags read from JPEG heads built here, in both byte orders. */
class ExifSuite extends AnyFunSuite {

  /** SOI, then an APP1 EXIF block: IFD0 with orientation and a pointer to a sub-IFD holding
    * DateTimeOriginal `taken` (when given), then the start of a scan.
    */
  private def jpeg(order: ByteOrder, orientation: Int, taken: Option[String]): Array[Byte] = {
    val tiff = ByteBuffer.allocate(128).order(order)
    tiff.put((if (order == ByteOrder.LITTLE_ENDIAN) "II" else "MM").getBytes("ASCII"))
    tiff.putShort(42.toShort).putInt(8)
    tiff.putShort(2.toShort) // IFD0 at 8: two entries
    tiff.putShort(0x0112.toShort).putShort(3.toShort).putInt(1)
    tiff.putShort(orientation.toShort).putShort(0.toShort)
    tiff.putShort(0x8769.toShort).putShort(4.toShort).putInt(1).putInt(38)
    tiff.putInt(0) // next IFD
    tiff.putShort(if (taken.isDefined) 1.toShort else 0.toShort) // sub-IFD at 38
    taken.foreach { t =>
      tiff.putShort(0x9003.toShort).putShort(2.toShort).putInt(20).putInt(56)
      tiff.putInt(0)
      tiff.put((t + "\u0000").getBytes("ASCII")) // at 56
    }
    val body = java.util.Arrays.copyOf(tiff.array(), tiff.position())
    val payload = "Exif\u0000\u0000".getBytes("ASCII") ++ body
    val length = payload.length + 2
    Array(0xff, 0xd8, 0xff, 0xe1, length >> 8, length & 0xff).map(_.toByte) ++ payload ++
      Array(0xff, 0xda, 0, 2).map(_.toByte)
  }

  test("DateTimeOriginal and the orientation are read in either byte order") {
    Seq(ByteOrder.LITTLE_ENDIAN, ByteOrder.BIG_ENDIAN).foreach { order =>
      val head = jpeg(order, 6, Some("2024:05:01 10:00:02"))
      assert(Exif.dateTimeOriginal(head).contains("2024:05:01 10:00:02"), order)
      assert(Exif.orientation(head) == 6, order)
      assert(Exif.dateTimeOriginal(jpeg(order, 3, None)).isEmpty)
    }
  }

  test("a cut or damaged head gives no time and orientation 1, never an exception") {
    val head = jpeg(ByteOrder.LITTLE_ENDIAN, 8, Some("2024:05:01 10:00:02"))
    (0 until head.length).foreach { n =>
      val cut = head.take(n)
      Exif.dateTimeOriginal(cut)
      assert(Seq(1, 8).contains(Exif.orientation(cut)))
    }
    val damaged = head.clone()
    damaged(head.length - 30) = 0x7f.toByte // an offset far past the end
    Exif.dateTimeOriginal(damaged)
    assert(Exif.dateTimeOriginal(Array.emptyByteArray).isEmpty)
  }
}
