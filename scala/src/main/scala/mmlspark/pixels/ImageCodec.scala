package mmlspark.pixels

import org.opencv.core.{Core, Mat, MatOfByte}
import org.opencv.imgcodecs.Imgcodecs

/** Thrown for a file that cannot be turned into an image; the message says why. */
final class UndecodableImageException(message: String) extends IllegalArgumentException(message)

/** How [[ImageCodec.decode]] will decode some bytes: the EXIF orientation it applies, their header
  * (when read), the JPEG scale (1, 2, 4 or 8) and, above 1, the step of a subsampled read.
  */
final case class Prepared(
    orientation: Int,
    header: Option[ImageHeader],
    factor: Int,
    subsampleStep: Int
)

/** Decoding of encoded image bytes with OpenCV's `imdecode`, shared by the reader and the stages
  * that take binary input.
  */
object ImageCodec {

  val ColorModes: Array[String] = Array("color", "grayscale", "unchanged")

  /** Decodes `bytes` into a new Mat the caller releases.
    *
    * The header is read first: an image whose decoded size would pass `maxPixels` is refused before
    * anything is allocated (with [[UndecodableImageException]], so the row fails, not the task).
    *
    * @param colorMode
    *   `color`: 8-bit BGR; `grayscale`: 8-bit gray; `unchanged`: as stored (gray, BGR or BGRA, 8-
    *   or 16-bit)
    * @param applyOrientation
    *   rotate/flip a JPEG as its EXIF orientation tag says
    * @param reduceFactor
    *   decode at 1/2, 1/4 or 1/8 of the size (1: full size); `color` and `grayscale` use the
    *   codec's reduced decoding, `unchanged` resizes after decoding
    * @param minHeight
    *   with `minWidth`, when either is positive: decode a JPEG (`color` or `grayscale`) at the
    *   smallest of 1/8, 1/4, 1/2 and full scale whose (oriented) size still covers `minHeight` x
    *   `minWidth`, in place of `reduceFactor`; other formats are decoded at full size, except a
    *   PNG, TIFF, BMP or GIF over `maxPixels`, which is read keeping every n-th pixel of every n-th
    *   row for the largest n whose size still covers the minimum (see [[SubsampledDecode]])
    * @param maxPixels
    *   the most pixels the decoded image may have
    */
  def decode(
      bytes: Array[Byte],
      colorMode: String,
      applyOrientation: Boolean,
      reduceFactor: Int,
      minHeight: Int = 0,
      minWidth: Int = 0,
      maxPixels: Long = ImageLimits.maxPixels
  ): Mat = {
    val plan =
      prepare(bytes, colorMode, applyOrientation, reduceFactor, minHeight, minWidth, maxPixels)
    if (plan.subsampleStep > 1) return SubsampledDecode.decode(bytes, colorMode, plan.subsampleStep)
    val (orientation, header, factor) = (plan.orientation, plan.header, plan.factor)
    // Orientation is applied below, from our own EXIF reading, so that all modes agree.
    val flags = (colorMode, factor) match {
      case ("unchanged", _) => Imgcodecs.IMREAD_UNCHANGED
      case ("color", 1) => Imgcodecs.IMREAD_COLOR | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("color", 2) => Imgcodecs.IMREAD_REDUCED_COLOR_2 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("color", 4) => Imgcodecs.IMREAD_REDUCED_COLOR_4 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("color", 8) => Imgcodecs.IMREAD_REDUCED_COLOR_8 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("grayscale", 1) => Imgcodecs.IMREAD_GRAYSCALE | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("grayscale", 2) =>
        Imgcodecs.IMREAD_REDUCED_GRAYSCALE_2 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("grayscale", 4) =>
        Imgcodecs.IMREAD_REDUCED_GRAYSCALE_4 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case ("grayscale", 8) =>
        Imgcodecs.IMREAD_REDUCED_GRAYSCALE_8 | Imgcodecs.IMREAD_IGNORE_ORIENTATION
      case other => throw new IllegalArgumentException(s"unsupported decode options $other")
    }
    val buffer = new MatOfByte(bytes: _*)
    val decoded =
      try Imgcodecs.imdecode(buffer, flags)
      finally buffer.release()
    if (!decoded.empty() && header.isEmpty && decoded.total() > maxPixels) {
      val (width, height) = (decoded.cols(), decoded.rows())
      decoded.release()
      throw new UndecodableImageException(
        RowMessages.DecodedOverLimit(
          "width" -> width,
          "height" -> height,
          "pixels" -> width.toLong * height,
          "limit" -> maxPixels,
          "key" -> ImageLimits.MaxPixelsKey
        )
      )
    }
    if (decoded.empty()) {
      decoded.release()
      throw new UndecodableImageException(
        RowMessages.NotDecodable("bytes" -> bytes.length, "prefix" -> hexPrefix(bytes))
      )
    }
    val reduced =
      if (colorMode == "unchanged" && factor > 1) {
        val out = new Mat()
        org.opencv.imgproc.Imgproc.resize(
          decoded,
          out,
          new org.opencv.core.Size(
            math.ceil(decoded.cols() / factor.toDouble),
            math.ceil(decoded.rows() / factor.toDouble)
          ),
          0,
          0,
          org.opencv.imgproc.Imgproc.INTER_AREA
        )
        decoded.release()
        out
      } else decoded
    orient(reduced, orientation)
  }

  /** What [[decode]] will do with `bytes` under these settings, after the refusals it makes before
    * decoding (no data, an empty file, a truncated JPEG, a header over `maxPixels`): they are
    * thrown here, so a caller that decodes the same bytes otherwise can refuse what this decode
    * would refuse.
    */
  def prepare(
      bytes: Array[Byte],
      colorMode: String,
      applyOrientation: Boolean,
      reduceFactor: Int,
      minHeight: Int = 0,
      minWidth: Int = 0,
      maxPixels: Long = ImageLimits.maxPixels
  ): Prepared = {
    OpenCV.ensureLoaded()
    if (bytes == null) throw new UndecodableImageException(RowMessages.NoData())
    if (bytes.isEmpty) throw new UndecodableImageException(RowMessages.EmptyFile())
    if (isJpeg(bytes) && !hasJpegEnd(bytes)) {
      throw new UndecodableImageException(RowMessages.TruncatedJpeg("bytes" -> bytes.length))
    }
    val orientation = if (applyOrientation && isJpeg(bytes)) Exif.orientation(bytes) else 1
    val header = ImageHeader.read(bytes)
    val wanted = minHeight > 0 || minWidth > 0
    val scaled = header.exists(_.scalable) && colorMode != "unchanged"
    val factor = header match {
      case Some(h) if scaled && (minHeight > 0 || minWidth > 0) =>
        val (width, height) = if (orientation >= 5) (h.height, h.width) else (h.width, h.height)
        Seq(8, 4, 2)
          .find(f => ceilDiv(width, f) >= minWidth && ceilDiv(height, f) >= minHeight)
          .getOrElse(1)
      case _ if wanted => 1
      case _ => reduceFactor
    }
    header.foreach { h =>
      val decodedPixels =
        if (scaled) ceilDiv(h.width, factor).toLong * ceilDiv(h.height, factor) else h.pixels
      if (
        decodedPixels > maxPixels && wanted && colorMode != "unchanged" &&
        SubsampledDecode.Formats(h.format)
      ) {
        val step = SubsampledDecode.step(h, minHeight, minWidth)
        if (step > 1 && SubsampledDecode.pixels(h, step) <= maxPixels) {
          return Prepared(orientation, header, factor, step)
        }
      }
      if (decodedPixels > maxPixels) {
        val atScale =
          if (scaled && factor > 1)
            RowMessages.AtScale("pixels" -> decodedPixels, "factor" -> factor)
          else ""
        throw new UndecodableImageException(
          RowMessages.OverLimit(
            "width" -> h.width,
            "height" -> h.height,
            "pixels" -> h.pixels,
            "atScale" -> atScale,
            "limit" -> maxPixels,
            "smaller" -> smaller(h),
            "key" -> ImageLimits.MaxPixelsKey
          )
        )
      }
    }
    // After the limit: a header over it is refused as such, whatever follows it.
    if (isJpeg(bytes)) ImageHeader.jpegDataShortfall(bytes).foreach { case (have, need, blocks) =>
      throw new UndecodableImageException(
        RowMessages.CorruptJpeg("have" -> have, "blocks" -> blocks, "need" -> need)
      )
    }
    Prepared(orientation, header, factor, 1)
  }

  /** How an image over the pixel limit can be decoded smaller, by what its format allows: a JPEG at
    * a DCT scale (reduceFactor, or minHeight and minWidth), a PNG, TIFF, BMP or GIF read subsampled
    * (minHeight and minWidth only: reduceFactor decodes it whole first), other formats not at all.
    */
  private def smaller(h: ImageHeader): String =
    if (h.scalable) RowMessages.SmallerJpeg()
    else if (SubsampledDecode.Formats(h.format))
      RowMessages.SmallerSubsampled("format" -> h.format.toUpperCase)
    else ""

  /** Applies an EXIF orientation (1-8) the way OpenCV's own reader does; releases `mat` when it
    * returns a new Mat.
    */
  def orient(mat: Mat, orientation: Int): Mat = {
    def flipped(src: Mat, code: Int): Mat = {
      val out = new Mat()
      Core.flip(src, out, code)
      src.release()
      out
    }
    def transposed(src: Mat): Mat = {
      val out = new Mat()
      Core.transpose(src, out)
      src.release()
      out
    }
    orientation match {
      case 2 => flipped(mat, 1)
      case 3 => flipped(mat, -1)
      case 4 => flipped(mat, 0)
      case 5 => transposed(mat)
      case 6 => flipped(transposed(mat), 1)
      case 7 => flipped(transposed(mat), -1)
      case 8 => flipped(transposed(mat), 0)
      case _ => mat
    }
  }

  private def ceilDiv(a: Int, b: Int): Int = (a + b - 1) / b

  def isJpeg(bytes: Array[Byte]): Boolean =
    bytes.length >= 3 && bytes(0) == 0xff.toByte && bytes(1) == 0xd8.toByte && bytes(
      2
    ) == 0xff.toByte

  /** Whether an end-of-image marker (FF D9) stands in the last 1 KiB (cameras may pad after it). */
  private def hasJpegEnd(bytes: Array[Byte]): Boolean = {
    var i = bytes.length - 2
    val stop = math.max(2, bytes.length - 1024)
    while (i >= stop) {
      if (bytes(i) == 0xff.toByte && bytes(i + 1) == 0xd9.toByte) return true
      i -= 1
    }
    false
  }

  private def hexPrefix(bytes: Array[Byte]): String =
    bytes.take(4).map(b => f"${b & 0xff}%02x").mkString(" ")
}

/** Reads tags of a JPEG's EXIF block: the orientation (0x0112) and the time the photo was taken
  * (DateTimeOriginal, 0x9003 in the EXIF sub-IFD).
  */
object Exif {

  /** The orientation (1-8), or 1 when the JPEG has no (readable) EXIF orientation. */
  def orientation(jpeg: Array[Byte]): Int =
    try
      tiff(jpeg)
        .flatMap(t => t.entry(t.ifd0, 0x0112).map(e => t.u16(e + 8)))
        .filter(o => o >= 1 && o <= 8)
        .getOrElse(1)
    catch { case _: IndexOutOfBoundsException => 1 }

  /** DateTimeOriginal as the camera wrote it ("yyyy:MM:dd HH:mm:ss", the camera's local time), or
    * None when the JPEG (or the head of it given) has none that can be read.
    */
  def dateTimeOriginal(jpeg: Array[Byte]): Option[String] =
    try
      for {
        t <- tiff(jpeg)
        pointer <- t.entry(t.ifd0, 0x8769)
        entry <- t.entry(t.tiff + t.u32(pointer + 8).toInt, 0x9003)
        count = t.u32(entry + 4).toInt
        if t.u16(entry + 2) == 2 && count >= 19 && count <= 64
      } yield {
        val at = t.tiff + t.u32(entry + 8).toInt
        new String(jpeg, at, 19, "ISO-8859-1")
      }
    catch { case _: IndexOutOfBoundsException | _: IllegalArgumentException => None }

  /** The TIFF structure inside a JPEG's EXIF block. */
  private final class Tiff(b: Array[Byte], val tiff: Int) {
    private val little = b(tiff) == 'I'.toByte
    def u16(i: Int): Int =
      if (little) (b(i) & 0xff) | ((b(i + 1) & 0xff) << 8)
      else ((b(i) & 0xff) << 8) | (b(i + 1) & 0xff)
    def u32(i: Int): Long =
      if (little) (u16(i).toLong | (u16(i + 2).toLong << 16))
      else ((u16(i).toLong << 16) | u16(i + 2).toLong)
    def ifd0: Int = tiff + u32(tiff + 4).toInt

    /** The offset of the entry of `tag` in the IFD at `ifd`. */
    def entry(ifd: Int, tag: Int): Option[Int] =
      (0 until u16(ifd)).iterator.map(e => ifd + 2 + e * 12).find(u16(_) == tag)
  }

  private def tiff(b: Array[Byte]): Option[Tiff] = {
    def u8(i: Int): Int = b(i) & 0xff
    var pos = 2
    while (pos + 4 <= b.length && u8(pos) == 0xff) {
      val marker = u8(pos + 1)
      val length = (u8(pos + 2) << 8) | u8(pos + 3)
      if (marker == 0xda || marker == 0xd9) return None // start of scan: no EXIF before it
      if (marker == 0xe1 && length >= 8 && new String(b, pos + 4, 4, "ISO-8859-1") == "Exif") {
        return Some(new Tiff(b, pos + 10))
      }
      pos += 2 + length
    }
    None
  }
}
