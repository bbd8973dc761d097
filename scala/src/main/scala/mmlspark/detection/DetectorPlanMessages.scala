package mmlspark.detection

import mmlspark.contracts.RowMessage

/** The messages of a detector model an ObjectDetector cannot run (checked before any job), written
  * once: codegen writes them for the Python engine too (see [[mmlspark.contracts.RowMessage]]).
  */
object DetectorPlanMessages {
  val InputCount: RowMessage = RowMessage(
    "detectorInputs",
    "a detector has one input (the image tensor) but the model has {count}"
  )
  val NotImage: RowMessage = RowMessage(
    "detectorNotImage",
    "the model input {input} is not an image tensor [N, 3, H, W]"
  )
  val NotSquare: RowMessage = RowMessage(
    "detectorNotSquare",
    "the model input {input} is not square; a letterboxed image is"
  )
  val SizeMismatch: RowMessage = RowMessage(
    "detectorSize",
    "imageSize is {size} but the model takes {fixed}x{fixed} images (input {input})"
  )
  val NoOutput: RowMessage = RowMessage("detectorNoOutput", "the model has no output")
  val BadOutput: RowMessage = RowMessage("detectorBadOutput", "output {output}: {error}")
  val ClassCount: RowMessage = RowMessage(
    "detectorClasses",
    "the detector gives {classes} classes (output {output}, {format}) but classNames has " +
      "{count} ({names}); give one name per class"
  )
  val Layout: RowMessage = RowMessage(
    "yoloLayout",
    "a YOLO detector's output is [N, K, 5+C] (yolov5: boxes, then cx, cy, w, h, objectness and " +
      "C class scores) or [N, 4+C, K] (yolov8), but the model's is per image {shape}: {why}"
  )
  val NotTwoDimensions: RowMessage =
    RowMessage("yoloNotTwoDimensions", "it does not have two dimensions after the batch")
  val NotV5: RowMessage =
    RowMessage("yoloNotV5", "as yolov5 its last dimension must be fixed and at least 6")
  val NotV8: RowMessage =
    RowMessage("yoloNotV8", "as yolov8 its first dimension must be fixed and at least 5")
  val Ambiguous: RowMessage = RowMessage(
    "yoloAmbiguous",
    "modelFormat 'auto' cannot tell the layout; set modelFormat to yolov5 or yolov8"
  )

  val all: Seq[RowMessage] = Seq(
    InputCount,
    NotImage,
    NotSquare,
    SizeMismatch,
    NoOutput,
    BadOutput,
    ClassCount,
    Layout,
    NotTwoDimensions,
    NotV5,
    NotV8,
    Ambiguous
  )
}
