package mmlspark.opencv

import mmlspark.contracts.{TestObject, TransformerSuite}
import mmlspark.image.{ImageChecks, ImageFixtures}
import org.apache.spark.sql.Row

class ImageTransformerSuite extends TransformerSuite[ImageTransformer] {
  private val (h, w) = (ImageFixtures.height, ImageFixtures.width)

  override def testObjects: Seq[TestObject[ImageTransformer]] = Seq(
    TestObject(
      new ImageTransformer().flip(1).crop(1, 2, 3, 4),
      ImageFixtures.images,
      out => {
        val rows = ImageChecks.byPath(out)
        val image = rows("pattern.png").getAs[Row]("transformed")
        assert((image.getAs[Int]("height"), image.getAs[Int]("width")) == (3, 4))
        // Mirrored left-right, then the 3x4 region at x=1, y=2.
        val expected = ImageFixtures.expectedBytes((y, x) => (y + 2, w - 1 - (x + 1)), 3, 4)
        assert(ImageChecks.bytes(image) == expected)
        assert(rows("notes.jpg").getAs[String]("transformError").contains("no input image"))
      }
    ),
    TestObject(
      new ImageTransformer().setToTensor(true).centerCrop(4, 6),
      ImageFixtures.images,
      out => {
        val rows = ImageChecks.byPath(out)
        val row = rows("pattern.png")
        val tensor = row.getSeq[Float](row.fieldIndex("transformed"))
        // CHW, RGB: channel 0 is the pattern's channel 2 (BGR order); offsets (1, 1).
        val expected =
          for (c <- 0 until 3; y <- 0 until 4; x <- 0 until 6)
            yield ImageFixtures.pixel(y + 1, x + 1, 2 - c).toFloat
        assert(tensor == expected)
        assert(
          out.schema("transformed").metadata.getLongArray("tensorShape").toSeq == Seq(3L, 4L, 6L)
        )
      }
    ),
    TestObject(
      new ImageTransformer().crop(5, 5, 4, 4),
      ImageFixtures.images,
      out => {
        val row = ImageChecks.byPath(out)("pattern.png")
        assert(row.isNullAt(row.fieldIndex("transformed")))
        assert(row.getAs[String]("transformError").contains("outside the 6x8 image"))
      }
    )
  )

  test("operations keep their order and survive the JSON form") {
    val stage = new ImageTransformer()
      .resize(10, 12)
      .colorFormat("GRAY")
      .normalize(Array(0.5), Array(0.25), 1.0 / 255)
    assert(
      stage.getOps == Seq(
        Resize(10, 12),
        ColorFormat("GRAY"),
        Normalize(Seq(0.5), Seq(0.25), 1.0 / 255)
      )
    )
    assert(ImageOp.fromJson(ImageOp.toJson(stage.getOps)) == stage.getOps)
    assert(stage.setToTensor(true).tensorShape.toSeq == Seq(1L, 10L, 12L))
    assert(
      new ImageTransformer().resize(256, keepAspectRatio = true).tensorShape.toSeq == Seq(
        3L,
        -1L,
        -1L
      )
    )
  }

  test("invalid operations fail when set, naming the operation") {
    val error = intercept[IllegalArgumentException](new ImageTransformer().centerCrop(0, 5))
    assert(error.getMessage.contains("centerCrop"))
    val unknown = intercept[IllegalArgumentException](
      new ImageTransformer().setOperations("""[{"op":"sharpen"}]""")
    )
    assert(unknown.getMessage.contains("unknown image operation 'sharpen'"))
    intercept[IllegalArgumentException](
      new ImageTransformer().setOperations("""[{"op":"resize","height":3}]""")
    )
  }

  test("an input column that is not an image fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      new ImageTransformer().setInputCol("path").transform(ImageFixtures.images)
    )
    assert(error.getMessage.contains("'path' must be an image struct"))
  }
}
