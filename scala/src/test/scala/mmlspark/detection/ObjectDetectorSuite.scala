package mmlspark.detection

import mmlspark.contracts.{SparkTestSession, TestObject, TransformerSuite}
import mmlspark.image.ImageFixtures
import mmlspark.onnx.OnnxFixtures
import mmlspark.opencv.LetterboxGeometry
import mmlspark.pixels.OpenCV
import org.apache.spark.sql.{DataFrame, Row}
import org.opencv.core.{CvType, Mat}

/** `yolo_echo.onnx` (tests/onnx_models.py) gives as its yolov5 output [16 boxes, 8] the red channel
  * of the 32x32 image's top-left 16x8 pixels, pixel / 255 times 32 for cx, cy, w, h; so the images
  * here spell the raw output, and the expected detections follow from the pixels.
  */
class ObjectDetectorSuite extends TransformerSuite[ObjectDetector] {

  /** A 32x32 image whose box `k` has red values `values(k)` (cx, cy, w, h, objectness, 3 classes).
    */
  private def spelled(values: Map[Int, Seq[Int]]): Array[Byte] = {
    OpenCV.ensureLoaded()
    val mat = new Mat(32, 32, CvType.CV_8UC3)
    try {
      mat.setTo(new org.opencv.core.Scalar(0, 0, 0))
      values.foreach { case (k, v) =>
        v.zipWithIndex.foreach { case (p, i) => mat.put(k, i, 0, 0, p) }
      }
      ImageFixtures.encode(mat, ".png")
    } finally mat.release()
  }

  // Box 0: an animal (objectness 1, class 0) at the centre; box 1 the same animal a little off,
  // less sure (suppressed); box 2 a person where box 0 is (another class: kept); box 3 nothing.
  private lazy val scene = spelled(
    Map(
      0 -> Seq(128, 128, 64, 96, 255, 255, 0, 0),
      1 -> Seq(130, 128, 64, 96, 204, 255, 0, 0),
      2 -> Seq(128, 128, 64, 96, 153, 0, 255, 0),
      3 -> Seq(20, 20, 10, 10, 0, 255, 0, 0)
    )
  )

  private def input: DataFrame = {
    import SparkTestSession.spark.implicits._
    Seq(
      ("scene.png", scene),
      ("empty.png", spelled(Map.empty)),
      ("notes.jpg", "not an image at all".getBytes("UTF-8"))
    ).toDF("path", "content")
  }

  private def detector = new ObjectDetector()
    .setModelPayload(OnnxFixtures.bytes("yolo_echo.onnx"))
    .setInputCol("content")
    .setConfidenceThreshold(0.2)

  private def byPath(out: DataFrame): Map[String, Row] =
    out.collect().map(r => r.getAs[String]("path") -> r).toMap

  private def detections(row: Row): Seq[Row] = row.getSeq[Row](row.fieldIndex("detections"))

  override def testObjects: Seq[TestObject[ObjectDetector]] = Seq(
    TestObject(
      detector,
      input,
      out => {
        val rows = byPath(out)
        val found = detections(rows("scene.png"))
        assert(
          found.map(d => (d.getString(0), d.getString(1))) == Seq("1" -> "animal", "2" -> "person")
        )
        assert(found.map(_.getDouble(2)) == Seq(1.0, 153f / 255f * 1f).map(_.toDouble))
        // cx = 128/255*32, w = 64/255*32, over a 32-pixel image: x_min = (cx - w/2) / 32.
        val bbox = found.head.getSeq[Double](3)
        val expected = Seq(96.0 / 255, 80.0 / 255, 64.0 / 255, 96.0 / 255)
        bbox.zip(expected).foreach { case (g, e) =>
          assert(math.abs(g - e) < 1e-5, (bbox, expected))
        }
        assert(detections(rows("empty.png")).isEmpty)
        assert(rows("empty.png").isNullAt(rows("empty.png").fieldIndex("detectionError")))
        assert(rows("notes.jpg").isNullAt(rows("notes.jpg").fieldIndex("detections")))
        assert(rows("notes.jpg").getAs[String]("detectionError") != null)
        assert(out.columns.toSeq == Seq("path", "content", "detections", "detectionError"))
      }
    ),
    TestObject(
      detector.setInputCol("image").setMaxDetections(1).setClassNames(Array("a", "b", "c")),
      new mmlspark.image.ImageDecoder().setOriginCol("path").transform(input).drop("content"),
      out => {
        val rows = byPath(out)
        assert(detections(rows("scene.png")).map(_.getString(1)) == Seq("a"))
        assert(rows("notes.jpg").getAs[String]("detectionError").contains("no input image"))
      }
    )
  )

  test("the layout is told from the output's shape, and a shape that fits neither says why") {
    assert(YoloLayout.resolve(Seq(25200, 8), "auto") == YoloLayout("yolov5", 3))
    assert(YoloLayout.resolve(Seq(7, 8400), "auto") == YoloLayout("yolov8", 3))
    assert(YoloLayout.resolve(Seq(-1, 85), "auto") == YoloLayout("yolov5", 80))
    assert(YoloLayout.resolve(Seq(84, -1), "AUTO") == YoloLayout("yolov8", 80))
    assert(YoloLayout.resolve(Seq(9, 9), "YOLOv8") == YoloLayout("yolov8", 5))
    assert(YoloLayout.resolve(Seq(4, 8), "auto") == YoloLayout("yolov5", 3)) // 4 boxes, not v8
    assert(YoloLayout.resolve(Seq(7, 3), "auto") == YoloLayout("yolov8", 3)) // 3 boxes
    val ambiguous = intercept[IllegalArgumentException](YoloLayout.resolve(Seq(9, 9), "auto"))
    assert(ambiguous.getMessage.contains("set modelFormat"))
    intercept[IllegalArgumentException](YoloLayout.resolve(Seq(-1, -1), "auto"))
    intercept[IllegalArgumentException](YoloLayout.resolve(Seq(100), "auto"))
  }

  test("a model whose classes do not match classNames fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      detector.setClassNames(Array("animal", "person")).transformSchema(input.schema)
    )
    assert(error.getMessage.contains("3 classes") && error.getMessage.contains("classNames"))
    val size = intercept[IllegalArgumentException](
      detector.setImageSize(640).transformSchema(input.schema)
    )
    assert(size.getMessage.contains("32x32"))
  }

  test("the letterbox maps back: a box over the whole square is the whole image") {
    val g = LetterboxGeometry(300, 120, 64) // tall: scaled to 64 x 26 (25.6 rounded), 19 left
    assert((g.scaledHeight, g.scaledWidth, g.top, g.left) == (64, 26, 0, 19))
    assert(g.toImageX(0) == 0 && g.toImageX(64) == 120 && g.toImageY(64) == 300)
    assert(math.abs(g.toImageX(19 + 13) - 60) < 1e-9)
    val decoder = YoloDecoder(YoloLayout("yolov8", 1), 0.1, 0.5, 10, Seq("thing"))
    // yolov8 layout [5, 2]: box 0 covers the square, box 1 is under the threshold.
    val raw = Array[Float](32, 1, 32, 1, 64, 1, 64, 1, 0.9f, 0.05f)
    val Seq(d) = decoder(raw, g)
    assert(d.bbox == Seq(0.0, 0.0, 1.0, 1.0) && d.category == "1" && d.label == "thing")
  }
}
