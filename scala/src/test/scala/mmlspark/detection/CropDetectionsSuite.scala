package mmlspark.detection

import mmlspark.contracts.{SparkTestSession, TestObject, TransformerSuite}
import mmlspark.image.{ImageDecoder, ImageFixtures}
import mmlspark.pixels.OpenCV
import org.apache.spark.sql.{DataFrame, Row}
import org.opencv.core.{CvType, Mat}

class CropDetectionsSuite extends TransformerSuite[CropDetections] {

  /** A height x width image whose sample (y, x, c) is ImageFixtures.pixel(y, x, c). */
  private def png(height: Int, width: Int): Array[Byte] = {
    OpenCV.ensureLoaded()
    val mat = new Mat(height, width, CvType.CV_8UC3)
    try {
      val data = Array.tabulate(height * width * 3) { i =>
        ImageFixtures.pixel(i / 3 / width, i / 3 % width, i % 3).toByte
      }
      mat.put(0, 0, data)
      ImageFixtures.encode(mat, ".png")
    } finally mat.release()
  }

  private val animal = Detection("1", "animal", 0.9, Seq(0.1, 0.25, 0.5, 0.5))
  private val faint = Detection("1", "animal", 0.1, Seq(0.0, 0.0, 0.5, 0.5))
  private val person = Detection("2", "person", 0.8, Seq(0.0, 0.0, 0.2, 1.0))

  /** A 40x60 photo with three detections, a 20x40 one with a wide box, an unreadable file, and a
    * photo without detections.
    */
  private def files: DataFrame = {
    import SparkTestSession.spark.implicits._
    Seq(
      ("photo.png", png(40, 60), Seq(animal, faint, person)),
      ("wide.png", png(20, 40), Seq(Detection("3", "vehicle", 0.5, Seq(0.0, 0.0, 1.0, 0.5)))),
      ("broken.jpg", "not an image".getBytes("UTF-8"), Seq(animal)),
      ("empty.png", png(10, 10), Seq.empty[Detection])
    ).toDF("path", "content", "detections")
  }

  private def images: DataFrame =
    new ImageDecoder().setInputCol("content").setOriginCol("path").transform(files).drop("content")

  private def cropsOf(out: DataFrame): Map[(String, Int), Row] =
    out.collect().map(r => (r.getAs[String]("path"), r.getAs[Int]("detectionIndex")) -> r).toMap

  /** The crop's samples against the pattern at (top, left), with `pad` rows/columns of black. */
  private def assertCrop(crop: Row, h: Int, w: Int, y0: Int, x0: Int, padTop: Int = 0): Unit = {
    assert((crop.getAs[Int]("height"), crop.getAs[Int]("width")) == (h, w))
    val data = crop.getAs[Array[Byte]]("data")
    for (y <- 0 until h; x <- 0 until w; c <- 0 until 3) {
      val sy = y - padTop
      val expected =
        if (sy < 0 || sy >= h - 2 * padTop) 0 else ImageFixtures.pixel(y0 + sy, x0 + x, c)
      assert((data((y * w + x) * 3 + c) & 0xff) == expected, (y, x, c))
    }
  }

  override def testObjects: Seq[TestObject[CropDetections]] = Seq(
    TestObject(
      new CropDetections(),
      images,
      out => {
        val crops = cropsOf(out)
        // The faint animal is under the threshold; the broken file's crop says why.
        assert(
          crops.keySet == Set(
            ("photo.png", 0),
            ("photo.png", 2),
            ("wide.png", 0),
            ("broken.jpg", 0)
          )
        )
        assert(
          out.columns.toSeq == Seq(
            "path",
            "detections",
            "error",
            "detectionIndex",
            "detection",
            "crop",
            "cropError"
          )
        )
        val photo = crops(("photo.png", 0))
        assert(photo.getAs[Row]("detection").getAs[String]("label") == "animal")
        assert(photo.getAs[Row]("crop").getAs[String]("origin") == "photo.png")
        assertCrop(photo.getAs[Row]("crop"), 20, 30, 10, 6)
        assertCrop(crops(("photo.png", 2)).getAs[Row]("crop"), 40, 12, 0, 0)
        assert(crops(("broken.jpg", 0)).isNullAt(crops(("broken.jpg", 0)).fieldIndex("crop")))
        assert(crops(("broken.jpg", 0)).getAs[String]("cropError").contains("no input image"))
      }
    ),
    TestObject(
      new CropDetections().setInputCol("content").setSquare(true).setCategories(Array("1", "3")),
      files,
      out => {
        val crops = cropsOf(out)
        assert(crops.keySet == Set(("photo.png", 0), ("wide.png", 0), ("broken.jpg", 0)))
        // 30x20 box widened to 30x30, moved up by 5 rows; the wide box padded to 40x40.
        assertCrop(crops(("photo.png", 0)).getAs[Row]("crop"), 30, 30, 5, 6)
        assertCrop(crops(("wide.png", 0)).getAs[Row]("crop"), 40, 40, 0, 0, padTop = 10)
        assert(crops(("broken.jpg", 0)).getAs[String]("cropError") != null)
      }
    ),
    TestObject(
      new CropDetections().setKeepUncropped(true).setConfidenceThreshold(0.95),
      images,
      out => {
        // Nothing reaches 0.95: every image is kept once, with nulls for what a crop gives.
        val rows = out.collect()
        assert(
          rows.map(_.getAs[String]("path")).sorted.toSeq == Seq(
            "broken.jpg",
            "empty.png",
            "photo.png",
            "wide.png"
          )
        )
        for (r <- rows; c <- Seq("detectionIndex", "detection", "crop", "cropError"))
          assert(r.isNullAt(r.fieldIndex(c)), (r.getAs[String]("path"), c))
        assert(rows.find(_.getAs[String]("path") == "photo.png").get.getSeq[Row](1).length == 3)
      }
    ),
    TestObject(
      new CropDetections().setKeepUncropped(true),
      images,
      out => {
        // Images with crops give exactly their crops; the others one row each.
        val keys = out
          .collect()
          .map(r =>
            (r.getAs[String]("path"), Option(r.getAs[Integer]("detectionIndex")).map(_.toInt))
          )
        assert(
          keys.sorted.toSeq == Seq(
            ("broken.jpg", Some(0)),
            ("empty.png", None),
            ("photo.png", Some(0)),
            ("photo.png", Some(2)),
            ("wide.png", Some(0))
          )
        )
      }
    )
  )

  test("a column that does not hold detections fails in transformSchema, naming what it wants") {
    val error = intercept[IllegalArgumentException](
      new CropDetections().setDetectionsCol("path").transformSchema(images.schema)
    )
    assert(error.getMessage.contains("ObjectDetector"))
  }
}
