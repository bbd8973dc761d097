package mmlspark.opencv

import mmlspark.contracts.RowMessage

/** The messages of an image operation that cannot apply to a row's image (after the operation's
  * name), written once: codegen writes them for the Python engine too (see
  * [[mmlspark.contracts.RowMessage]]).
  */
object OpMessages {
  val Outside: RowMessage = RowMessage(
    "opOutside",
    "region x={x} y={y} {height}x{width} lies outside the {imageHeight}x{imageWidth} image"
  )
  val Larger: RowMessage =
    RowMessage("opLarger", "{height}x{width} is larger than the {imageHeight}x{imageWidth} image")
  val CannotConvert: RowMessage =
    RowMessage("opCannotConvert", "cannot convert a {channels}-channel {from} image to {to}")
  val MeansCount: RowMessage =
    RowMessage("opMeansCount", "{means} means for a {channels}-channel image")
  val EmptyLetterbox: RowMessage =
    RowMessage("letterboxEmpty", "letterbox: an empty {width}x{height} image")

  val all: Seq[RowMessage] = Seq(Outside, Larger, CannotConvert, MeansCount, EmptyLetterbox)
}
