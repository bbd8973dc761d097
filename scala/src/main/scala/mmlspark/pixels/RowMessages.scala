package mmlspark.pixels

import mmlspark.contracts.RowMessage

/** The messages of the rows that cannot be read, decoded or transformed, written once: the JVM's
  * pixel layer fills them here, and codegen writes them into the Python engine
  * (`mmlspark/_engine/_RowMessages.py`), which fills them the same way, so the two backends give
  * the same words.
  */
object RowMessages {
  val NoData: RowMessage = RowMessage("noData", "no data (null)")
  val NoImage: RowMessage = RowMessage("noImage", "no input image (null)")
  val UnsupportedMode: RowMessage =
    RowMessage("unsupportedMode", "unsupported image mode {mode} ({type})")
  val DataSize: RowMessage =
    RowMessage("dataSize", "image data has {found} bytes, expected {expected}")
  val EmptyFile: RowMessage = RowMessage("emptyFile", "empty file (0 bytes)")
  val TruncatedJpeg: RowMessage =
    RowMessage("truncatedJpeg", "truncated JPEG: no end-of-image marker in {bytes} bytes")
  val CorruptJpeg: RowMessage = RowMessage(
    "corruptJpeg",
    "corrupt JPEG: {have} bytes of image data for a frame of {blocks} 8x8 blocks, which takes " +
      "at least {need}; the file is damaged (its image data is missing)"
  )
  val NotDecodable: RowMessage = RowMessage(
    "notDecodable",
    "not a decodable image ({bytes} bytes starting {prefix}): unknown format or corrupt data"
  )

  /** A header over the limit; `atScale` is [[AtScale]] or empty, `smaller` one of the `Smaller*`.
    */
  val OverLimit: RowMessage = RowMessage(
    "overLimit",
    "image is {width}x{height} ({pixels:mp}){atScale}, over the limit of {limit:mp} per image on " +
      "this executor; {smaller}give the executors more memory, or raise {key}"
  )
  val AtScale: RowMessage = RowMessage("atScale", " ({pixels:mp} at 1/{factor} scale)")
  val SmallerJpeg: RowMessage = RowMessage(
    "smallerJpeg",
    "decode it smaller (reduceFactor, or minHeight and minWidth where the image is resized " +
      "after), "
  )
  val SmallerSubsampled: RowMessage = RowMessage(
    "smallerSubsampled",
    "decode it smaller (minHeight and minWidth where the image is resized after: a {format} is " +
      "then read subsampled; reduceFactor cannot shrink it as it is read), "
  )

  /** The Python backend's, where the JVM would read the image subsampled. */
  val OverLimitWhole: RowMessage = RowMessage(
    "overLimitWhole",
    "image is {width}x{height} ({pixels:mp}), over the limit of {limit:mp} per image on this " +
      "executor; the Python backend decodes a {format} whole (the JVM backend reads it " +
      "subsampled to {minHeight}x{minWidth}): give the executors more memory, or raise {key}"
  )

  /** An image without a header that tells its size, over the limit once decoded. */
  val DecodedOverLimit: RowMessage = RowMessage(
    "decodedOverLimit",
    "image is {width}x{height} ({pixels:mp}), over the limit of {limit:mp} per image on this " +
      "executor; raise {key}"
  )
  val OpOverLimit: RowMessage = RowMessage(
    "opOverLimit",
    "{op} would make a {width}x{height} image ({pixels:mp}), over the limit of {limit:mp} per " +
      "image on this executor; raise {key}"
  )
  val FileOverLimit: RowMessage = RowMessage(
    "fileOverLimit",
    "file is {size:mb}, over the limit of {limit:mb} per file on this executor; raise {key}"
  )

  val all: Seq[RowMessage] = Seq(
    NoData,
    NoImage,
    UnsupportedMode,
    DataSize,
    EmptyFile,
    TruncatedJpeg,
    CorruptJpeg,
    NotDecodable,
    OverLimit,
    AtScale,
    SmallerJpeg,
    SmallerSubsampled,
    OverLimitWhole,
    DecodedOverLimit,
    OpOverLimit,
    FileOverLimit
  )
}
