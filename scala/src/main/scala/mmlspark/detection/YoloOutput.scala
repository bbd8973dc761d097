package mmlspark.detection

import mmlspark.contracts.{Choices, RowMessage}
import mmlspark.opencv.LetterboxGeometry

/** One detection, as MegaDetector writes it: `category` is the 1-based class id as a string,
  * `label` its name, `conf` the confidence and `bbox` = [x_min, y_min, width, height] as fractions
  * of the image's width and height.
  */
final case class Detection(category: String, label: String, conf: Double, bbox: Seq[Double])

/** The layout of a YOLO detector's output per image: `format` "yolov5" is `[K, 5 + C]` (cx, cy, w,
  * h, objectness, C class scores per box), "yolov8" is `[4 + C, K]` (cx, cy, w, h, C class scores,
  * each row over the K boxes); boxes in the letterboxed square's pixels.
  */
final case class YoloLayout(format: String, classes: Int) {

  /** Values per box. */
  def attributes: Int = if (format == YoloLayout.V5) 5 + classes else 4 + classes
}

object YoloLayout {
  val V5 = "yolov5"
  val V8 = "yolov8"

  /** `modelFormat`. */
  val Formats: Choices = Choices(Seq("auto", V5, V8))

  private def describe(shape: Seq[Long]): String =
    shape.map(d => if (d < 0) "?" else d.toString).mkString("[", ", ", "]")

  /** The layout of an output whose per-image shape is `rowShape` (-1 for a dynamic dimension), in
    * `format` ("auto" tells the two apart: the dimension of the attributes is fixed and, when both
    * are, the smaller); an error saying why when the shape fits neither or "auto" cannot tell.
    */
  def resolve(rowShape: Seq[Long], format: String): YoloLayout = {
    def fail(why: RowMessage): Nothing = throw new IllegalArgumentException(
      DetectorPlanMessages.Layout("shape" -> describe(rowShape), "why" -> why())
    )
    if (rowShape.length != 2) fail(DetectorPlanMessages.NotTwoDimensions)
    val (a, b) = (rowShape(0), rowShape(1))
    def v5: YoloLayout =
      if (b >= 6) YoloLayout(V5, (b - 5).toInt)
      else fail(DetectorPlanMessages.NotV5)
    def v8: YoloLayout =
      if (a >= 5) YoloLayout(V8, (a - 4).toInt)
      else fail(DetectorPlanMessages.NotV8)
    Formats(format) match {
      case V5 => v5
      case V8 => v8
      case _ =>
        // The attributes' dimension is fixed (and big enough); of two such, the smaller one.
        (b >= 6, a >= 5) match {
          case (true, false) => v5
          case (false, true) => v8
          case (true, true) if b < a => v5
          case (true, true) if a < b => v8
          case _ =>
            fail(DetectorPlanMessages.Ambiguous)
        }
    }
  }
}

/** Detections from one image's raw YOLO output: candidates over the confidence threshold, the best
  * class of each box (confidence = objectness x class score for yolov5, the class score for
  * yolov8), greedy non-maximum suppression per class in order of confidence (ties by box index), at
  * most `maxDetections` kept, boxes mapped back through the letterbox to the image.
  */
final case class YoloDecoder(
    layout: YoloLayout,
    confidenceThreshold: Double,
    iouThreshold: Double,
    maxDetections: Int,
    classNames: Seq[String]
) {

  require(
    classNames.length == layout.classes,
    s"the detector gives ${layout.classes} classes but classNames has ${classNames.length} " +
      s"(${classNames.mkString(", ")}); give one name per class"
  )

  /** At most this many candidates go into the suppression, the most confident first. */
  private val MaxCandidates = 30000

  def apply(raw: Array[Float], geometry: LetterboxGeometry): Seq[Detection] = {
    if (raw == null) throw new IllegalArgumentException(DetectionMessages.NoOutput())
    val per = layout.attributes
    if (raw.length % per != 0)
      throw new IllegalArgumentException(
        DetectionMessages.OutputSize(
          "values" -> raw.length,
          "per" -> per,
          "format" -> layout.format,
          "classes" -> layout.classes
        )
      )
    val boxes = raw.length / per
    val v5 = layout.format == YoloLayout.V5
    // Value `i` of box `k`.
    def at(k: Int, i: Int): Float = if (v5) raw(k * per + i) else raw(i * boxes + k)
    val first = if (v5) 5 else 4
    val threshold = confidenceThreshold.toFloat
    val candidates = Array.newBuilder[(Float, Int, Int)] // (conf, box, class)
    var k = 0
    while (k < boxes) {
      val objectness = if (v5) at(k, 4) else 1f
      if (!v5 || objectness > threshold) {
        var best = -1
        var bestConf = Float.NegativeInfinity
        var c = 0
        while (c < layout.classes) {
          val conf = if (v5) at(k, first + c) * objectness else at(k, first + c)
          if (conf > bestConf) { bestConf = conf; best = c }
          c += 1
        }
        if (bestConf > threshold) candidates += ((bestConf, k, best))
      }
      k += 1
    }
    val ordered = candidates.result().sortBy { case (conf, box, _) => (-conf, box) }
    val kept = scala.collection.mutable.ArrayBuffer.empty[(Float, Int, Int, Array[Double])]
    val it = ordered.iterator.take(MaxCandidates)
    while (it.hasNext && kept.length < maxDetections) {
      val (conf, box, cls) = it.next()
      val (cx, cy, w, h) = (at(box, 0).toDouble, at(box, 1).toDouble, at(box, 2), at(box, 3))
      val corners = Array(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
      if (!kept.exists(d => d._3 == cls && YoloDecoder.iou(d._4, corners) > iouThreshold))
        kept += ((conf, box, cls, corners))
    }
    kept.toSeq.map { case (conf, _, cls, c) =>
      val (x1, y1) = (geometry.toImageX(c(0)), geometry.toImageY(c(1)))
      val (x2, y2) = (geometry.toImageX(c(2)), geometry.toImageY(c(3)))
      Detection(
        (cls + 1).toString,
        classNames(cls),
        conf.toDouble,
        Seq(
          x1 / geometry.width,
          y1 / geometry.height,
          (x2 - x1) / geometry.width,
          (y2 - y1) / geometry.height
        )
      )
    }
  }
}

object YoloDecoder {

  /** Intersection over union of two boxes given as (x1, y1, x2, y2). */
  def iou(a: Array[Double], b: Array[Double]): Double = {
    val iw = math.min(a(2), b(2)) - math.max(a(0), b(0))
    val ih = math.min(a(3), b(3)) - math.max(a(1), b(1))
    if (iw <= 0 || ih <= 0) 0.0
    else {
      val inter = iw * ih
      val union = (a(2) - a(0)) * (a(3) - a(1)) + (b(2) - b(0)) * (b(3) - b(1)) - inter
      if (union <= 0) 0.0 else inter / union
    }
  }
}
