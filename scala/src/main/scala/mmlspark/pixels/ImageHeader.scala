package mmlspark.pixels

/** What an encoded image's header says, read before anything is decoded, so that memory can be
  * bounded before it is allocated (contract 3): a 924-byte JPEG may claim to be 25000x25000.
  *
  * @param format
  *   `jpeg`, `png`, `gif`, `bmp`, `webp`, `tiff` or `pnm`
  * @param scalable
  *   whether the codec can decode at 1/2, 1/4 or 1/8 of the size without first decoding at full
  *   size (JPEG's DCT scaling); other formats are decoded whole and resized after
  */
final case class ImageHeader(format: String, width: Int, height: Int, scalable: Boolean) {

  def pixels: Long = width.toLong * height.toLong
}

object ImageHeader {

  /** The header of `bytes`, or None for a format this reader does not know (OpenCV may still decode
    * it; its size is then checked after decoding).
    */
  def read(bytes: Array[Byte]): Option[ImageHeader] =
    try {
      if (bytes == null || bytes.length < 8) None
      else if (u8(bytes, 0) == 0xff && u8(bytes, 1) == 0xd8) jpeg(bytes)
      else if (startsWith(bytes, 0, Array(0x89, 'P', 'N', 'G'))) png(bytes)
      else if (startsWith(bytes, 0, Array('G', 'I', 'F', '8'))) {
        Some(ImageHeader("gif", le16(bytes, 6), le16(bytes, 8), scalable = false))
      } else if (startsWith(bytes, 0, Array('B', 'M')) && bytes.length >= 26) bmp(bytes)
      else if (
        startsWith(bytes, 0, Array('R', 'I', 'F', 'F')) &&
        startsWith(bytes, 8, Array('W', 'E', 'B', 'P'))
      ) webp(bytes)
      else if (
        startsWith(bytes, 0, Array('I', 'I', 42, 0)) ||
        startsWith(bytes, 0, Array('M', 'M', 0, 42))
      ) tiff(bytes)
      else if (u8(bytes, 0) == 'P' && u8(bytes, 1) >= '1' && u8(bytes, 1) <= '7') pnm(bytes)
      else None
    } catch {
      case _: IndexOutOfBoundsException => None // a header cut short: let the codec say why
    }

  private def u8(b: Array[Byte], i: Int): Int = b(i) & 0xff
  private def be16(b: Array[Byte], i: Int): Int = (u8(b, i) << 8) | u8(b, i + 1)
  private def le16(b: Array[Byte], i: Int): Int = u8(b, i) | (u8(b, i + 1) << 8)
  private def be32(b: Array[Byte], i: Int): Long = (be16(b, i).toLong << 16) | be16(b, i + 2)
  private def le32(b: Array[Byte], i: Int): Long = le16(b, i).toLong | (le16(b, i + 2).toLong << 16)

  private def startsWith(b: Array[Byte], at: Int, prefix: Array[Int]): Boolean =
    b.length >= at + prefix.length && prefix.indices.forall(i => u8(b, at + i) == prefix(i))

  private def clamp(v: Long): Int = math.min(v, Int.MaxValue.toLong).toInt

  /** The frame size from the first start-of-frame marker (SOF0-SOF15 except DHT, JPG, DAC). */
  private def jpeg(b: Array[Byte]): Option[ImageHeader] = {
    var pos = 2
    while (pos + 4 <= b.length) {
      if (u8(b, pos) != 0xff) return None
      val marker = u8(b, pos + 1)
      if (marker == 0xff) pos += 1 // fill byte
      else if (marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7)) pos += 2
      else if (marker == 0xda || marker == 0xd9) return None // scan before any frame header
      else {
        val length = be16(b, pos + 2)
        val isFrame = marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 &&
          marker != 0xcc
        if (isFrame) {
          // Progressive and lossless JPEGs are DCT-scaled too by libjpeg (SOF2 yes; SOF3 no).
          val scalable = marker != 0xc3 && marker != 0xc7 && marker != 0xcb && marker != 0xcf
          return Some(ImageHeader("jpeg", be16(b, pos + 7), be16(b, pos + 5), scalable))
        }
        pos += 2 + length
      }
    }
    None
  }

  /** For a Huffman-coded DCT JPEG (SOF0-SOF2), `(have, need, blocks)` when its entropy-coded data
    * is shorter than the frame it declares can be: every 8x8 block takes at least one bit (a
    * Huffman code is at least one bit long), so `need` is `blocks / 8` bytes, and `have` is what
    * lies between the first scan's header and the end-of-image marker. None when the data can be
    * that long, or the file is not such a JPEG. libjpeg decodes such a file as gray without an
    * error; this is how it is told apart (Python's `jpeg_data_shortfall`).
    */
  def jpegDataShortfall(b: Array[Byte]): Option[(Long, Long, Long)] = {
    var pos = 2
    var blocks = -1L
    while (pos + 4 <= b.length) {
      if (u8(b, pos) != 0xff) return None
      val marker = u8(b, pos + 1)
      if (marker == 0xff) pos += 1
      else if (marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7)) pos += 2
      else if (marker == 0xd9) return None
      else {
        val length = be16(b, pos + 2)
        if (marker >= 0xc0 && marker <= 0xc2) {
          if (pos + 10 > b.length) return None
          val height = be16(b, pos + 5).toLong
          val width = be16(b, pos + 7).toLong
          val count = u8(b, pos + 9)
          if (count == 0 || pos + 10 + 3 * count > b.length) return None
          val factors = (0 until count).map(i => u8(b, pos + 11 + 3 * i))
          val h = factors.map(_ >> 4)
          val v = factors.map(_ & 15)
          if (h.min == 0 || v.min == 0) return None
          val mcus = ceilDiv(width, 8L * h.max) * ceilDiv(height, 8L * v.max)
          blocks = mcus * h.zip(v).map { case (a, c) => a * c }.sum
        } else if (
          marker >= 0xc3 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc
        ) {
          return None // lossless or arithmetic-coded: a block may take less than a bit
        } else if (marker == 0xda) {
          if (blocks < 0) return None
          val start = pos + 2 + length
          var end = b.length - 2
          val stop = math.max(start, b.length - 1024)
          while (end >= stop && !(u8(b, end) == 0xff && u8(b, end + 1) == 0xd9)) end -= 1
          val have = (if (end >= stop) end else b.length).toLong - start
          val need = ceilDiv(blocks, 8L)
          return if (have < need) Some((have, need, blocks)) else None
        }
        pos += 2 + length
      }
    }
    None
  }

  private def ceilDiv(a: Long, b: Long): Long = (a + b - 1) / b

  private def png(b: Array[Byte]): Option[ImageHeader] =
    if (b.length >= 24 && startsWith(b, 12, Array('I', 'H', 'D', 'R'))) {
      Some(ImageHeader("png", clamp(be32(b, 16)), clamp(be32(b, 20)), scalable = false))
    } else None

  private def bmp(b: Array[Byte]): Option[ImageHeader] = {
    val headerSize = le32(b, 14)
    if (headerSize == 12) Some(ImageHeader("bmp", le16(b, 18), le16(b, 20), scalable = false))
    else {
      // Height is negative for top-down bitmaps.
      val height = math.abs(le32(b, 22).toInt.toLong)
      Some(ImageHeader("bmp", clamp(math.abs(le32(b, 18).toInt.toLong)), clamp(height), false))
    }
  }

  private def webp(b: Array[Byte]): Option[ImageHeader] = {
    val chunk = new String(b, 12, 4, "ISO-8859-1")
    chunk match {
      case "VP8 " if b.length >= 30 =>
        Some(ImageHeader("webp", le16(b, 26) & 0x3fff, le16(b, 28) & 0x3fff, scalable = false))
      case "VP8L" if b.length >= 25 =>
        val bits = le32(b, 21)
        val width = (bits & 0x3fff) + 1
        val height = ((bits >> 14) & 0x3fff) + 1
        Some(ImageHeader("webp", width.toInt, height.toInt, scalable = false))
      case "VP8X" if b.length >= 30 =>
        val width = (u8(b, 24) | (u8(b, 25) << 8) | (u8(b, 26) << 16)) + 1
        val height = (u8(b, 27) | (u8(b, 28) << 8) | (u8(b, 29) << 16)) + 1
        Some(ImageHeader("webp", width, height, scalable = false))
      case _ => None
    }
  }

  /** Width and height (tags 256, 257) of the first image file directory. */
  private def tiff(b: Array[Byte]): Option[ImageHeader] = {
    val little = b(0) == 'I'.toByte
    def u16(i: Int): Int = if (little) le16(b, i) else be16(b, i)
    def u32(i: Int): Long = if (little) le32(b, i) else be32(b, i)
    val ifd = Math.toIntExact(u32(4))
    val entries = u16(ifd)
    def value(entry: Int): Long = if (u16(entry + 2) == 3) u16(entry + 8).toLong else u32(entry + 8)
    val tags = (0 until entries).map(e => ifd + 2 + e * 12).map(e => u16(e) -> value(e)).toMap
    for { w <- tags.get(256); h <- tags.get(257) } yield ImageHeader(
      "tiff",
      clamp(w),
      clamp(h),
      false
    )
  }

  /** Netpbm: "P6 <width> <height> ..." in ASCII, with # comments. */
  private def pnm(b: Array[Byte]): Option[ImageHeader] = {
    val text = new String(b, 2, math.min(b.length - 2, 1024), "ISO-8859-1")
    val numbers = text.linesIterator
      .map(_.takeWhile(_ != '#'))
      .flatMap(_.trim.split("\\s+"))
      .filter(_.nonEmpty)
      .take(2)
      .toList
    numbers match {
      case Seq(w, h)
          if w.forall(_.isDigit) && h.forall(_.isDigit) && w.length < 10 && h.length < 10 =>
        Some(ImageHeader("pnm", w.toInt, h.toInt, scalable = false))
      case _ => None
    }
  }
}
