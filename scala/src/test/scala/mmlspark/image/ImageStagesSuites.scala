package mmlspark.image

import mmlspark.contracts.{TestObject, TransformerSuite}
import mmlspark.pixels.{ImageCodec, ImageSchemaUtils}
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.sql.{DataFrame, Row}

object ImageChecks {
  def bytes(image: Row): Seq[Int] = image.getAs[Array[Byte]]("data").toSeq.map(_ & 0xff)

  def byPath(df: DataFrame): Map[String, Row] =
    df.collect().map(r => r.getAs[String]("path") -> r).toMap
}

class ImageDecoderSuite extends TransformerSuite[ImageDecoder] {
  import ImageChecks._

  private def checkDecoded(out: DataFrame): Unit = {
    val rows = byPath(out)
    assert(rows.size == 3, "every file keeps its row")
    val image = rows("pattern.png").getAs[Row]("image")
    assert(image.getAs[String]("origin") == "pattern.png")
    assert(
      (image.getAs[Int]("height"), image.getAs[Int]("width"), image.getAs[Int]("nChannels")) == (
        6,
        8,
        3
      )
    )
    assert(image.getAs[Int]("mode") == 16) // CV_8UC3
    assert(bytes(image) == ImageFixtures.expectedBytes())
    assert(rows("pattern.png").isNullAt(rows("pattern.png").fieldIndex("error")))
    assert(rows("notes.jpg").isNullAt(rows("notes.jpg").fieldIndex("image")))
    assert(rows("notes.jpg").getAs[String]("error").contains("not a decodable image"))
    assert(rows("empty.jpg").getAs[String]("error") == "empty file (0 bytes)")
  }

  override def testObjects: Seq[TestObject[ImageDecoder]] = Seq(
    TestObject(new ImageDecoder().setOriginCol("path"), ImageFixtures.files, checkDecoded),
    TestObject(
      new ImageDecoder().setOriginCol("path").setColorMode("grayscale").setDropInvalid(true),
      ImageFixtures.files,
      out => {
        val rows = out.collect()
        assert(rows.length == 1)
        assert(rows.head.getAs[Row]("image").getAs[Int]("nChannels") == 1)
      }
    )
  )

  test("a column that is not binary fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      new ImageDecoder().setInputCol("path").transformSchema(ImageFixtures.files.schema)
    )
    assert(error.getMessage.contains("'path' must be binary but was string"))
  }

  test("bad decode options fail when set") {
    intercept[IllegalArgumentException](new ImageDecoder().setColorMode("cmyk"))
    intercept[IllegalArgumentException](new ImageDecoder().setReduceFactor(3))
  }

  test("EXIF orientation 1-8 maps each output pixel to the source pixel OpenCV documents") {
    val source = ImageFixtures.patternMat()
    try {
      val (h, w) = (ImageFixtures.height, ImageFixtures.width)
      // (output y, x) -> source (y, x); orientations 5-8 swap height and width.
      val mappings: Map[Int, (Int, Int) => (Int, Int)] = Map(
        1 -> ((y, x) => (y, x)),
        2 -> ((y, x) => (y, w - 1 - x)),
        3 -> ((y, x) => (h - 1 - y, w - 1 - x)),
        4 -> ((y, x) => (h - 1 - y, x)),
        5 -> ((y, x) => (x, y)),
        6 -> ((y, x) => (h - 1 - x, y)),
        7 -> ((y, x) => (h - 1 - x, w - 1 - y)),
        8 -> ((y, x) => (x, w - 1 - y))
      )
      mappings.foreach { case (orientation, map) =>
        val oriented = ImageCodec.orient(source.clone(), orientation)
        try {
          val struct = ImageSchemaUtils.toStruct(oriented, null)
          val (oh, ow) = if (orientation >= 5) (w, h) else (h, w)
          assert((struct.height, struct.width) == (oh, ow), s"orientation $orientation")
          assert(
            struct.data.toSeq.map(_ & 0xff) == ImageFixtures.expectedBytes(map, oh, ow),
            s"orientation $orientation"
          )
        } finally oriented.release()
      }
    } finally source.release()
  }
}

class UnrollImageSuite extends TransformerSuite[UnrollImage] {
  override def testObjects: Seq[TestObject[UnrollImage]] = Seq(
    TestObject(
      new UnrollImage(),
      ImageFixtures.images,
      out => {
        val rows = ImageChecks.byPath(out)
        val vector = rows("pattern.png").getAs[Vector]("unrolled").toArray.toSeq
        val (h, w) = (ImageFixtures.height, ImageFixtures.width)
        val expected =
          for (c <- 0 until 3; y <- 0 until h; x <- 0 until w)
            yield ImageFixtures.pixel(y, x, c).toDouble
        assert(vector == expected)
        assert(rows("notes.jpg").isNullAt(rows("notes.jpg").fieldIndex("unrolled")))
        assert(rows("notes.jpg").getAs[String]("unrollError").contains("no input image"))
      }
    )
  )
}

class UnrollBinaryImageSuite extends TransformerSuite[UnrollBinaryImage] {
  override def testObjects: Seq[TestObject[UnrollBinaryImage]] = Seq(
    TestObject(
      new UnrollBinaryImage(),
      ImageFixtures.files,
      out => {
        val rows = ImageChecks.byPath(out)
        val unrolled = new UnrollImage().transform(ImageFixtures.images)
        val viaImage = ImageChecks.byPath(unrolled)("pattern.png").getAs[Vector]("unrolled")
        assert(rows("pattern.png").getAs[Vector]("unrolled") == viaImage)
        assert(rows("empty.jpg").getAs[String]("error") == "empty file (0 bytes)")
      }
    ),
    TestObject(
      new UnrollBinaryImage().setHeight(3).setWidth(4),
      ImageFixtures.files,
      out =>
        assert(ImageChecks.byPath(out)("pattern.png").getAs[Vector]("unrolled").size == 3 * 4 * 3)
    )
  )

  test("only one of height and width set fails in transformSchema") {
    intercept[IllegalArgumentException](
      new UnrollBinaryImage().setHeight(3).transformSchema(ImageFixtures.files.schema)
    )
  }
}
