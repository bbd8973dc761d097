package mmlspark.detection

import mmlspark.contracts.RowMessage

/** The messages of rows a detector's output or a detection cannot serve, written once: codegen
  * writes them for the Python engine too (see [[mmlspark.contracts.RowMessage]]).
  */
object DetectionMessages {
  val NoOutput: RowMessage = RowMessage("noDetectorOutput", "no detector output (null)")
  val OutputSize: RowMessage = RowMessage(
    "detectorOutputSize",
    "the detector output has {values} values, not a multiple of {per} ({format} with {classes} " +
      "classes)"
  )
  val BoxSize: RowMessage = RowMessage("boxSize", "a bbox has 4 values, not {count}")
  val BoxNull: RowMessage = RowMessage("boxNull", "the box [{box}] has a null value")
  val BoxEmpty: RowMessage =
    RowMessage("boxEmpty", "the box [{box}] is empty in a {width}x{height} image")

  val all: Seq[RowMessage] = Seq(NoOutput, OutputSize, BoxSize, BoxNull, BoxEmpty)
}
