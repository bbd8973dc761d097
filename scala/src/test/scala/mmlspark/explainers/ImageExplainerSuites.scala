package mmlspark.explainers

import mmlspark.contracts.{SparkTestSession, Streaming, TestObject, TransformerSuite}
import mmlspark.opencv.{CenterCrop, Crop, Flip, ImageTransformer, Letterbox, Resize, ResizeShorter}
import mmlspark.pixels.ImageStruct
import org.apache.spark.ml.{Pipeline, PipelineModel}
import org.apache.spark.ml.feature.SQLTransformer
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.sql.{DataFrame, Row}

/** A 32 x 32 image of 4 x 4 flat blocks (8 pixels each) of distinct red values, and a model whose
  * score is the mean red (0 to 1) of the top-left 16 x 16 quadrant: with black for a superpixel
  * turned off, block b's exact weight is red_b / 255 / 4 for the quadrant's four blocks, 0 for the
  * others (worked by hand from the blocks' values).
  */
object ImageExplainerFixtures {
  import SparkTestSession.spark.implicits._

  /** The red of block b (row-major). */
  val reds: Array[Int] = Array.tabulate(16)(b => 30 + (b * 7 % 16) * 13)

  lazy val images: DataFrame = {
    val data = new Array[Byte](32 * 32 * 3)
    for (y <- 0 until 32; x <- 0 until 32) {
      val b = (y / 8) * 4 + x / 8
      data((y * 32 + x) * 3) = (b * 11).toByte // blue
      data((y * 32 + x) * 3 + 1) = (200 - b * 9).toByte // green
      data((y * 32 + x) * 3 + 2) = reds(b).toByte
    }
    Seq(Tuple1(ImageStruct("blocks", 32, 32, 3, 16, data))).toDF("image")
  }

  lazy val model: PipelineModel = {
    val tensor = new ImageTransformer()
      .setInputCol("image")
      .setOutputCol("tensor")
      .resize(32, 32)
      .normalize(Array(0.0, 0.0, 0.0), Array(1.0, 1.0, 1.0), 1.0 / 255)
    // CHW, red first: element i of the red plane is row i / 32, column i % 32
    val score = new SQLTransformer().setStatement(
      "SELECT *, aggregate(filter(slice(tensor, 1, 1024), (v, i) -> i < 512 AND i % 32 < 16), " +
        "0D, (acc, v) -> acc + v) / 256 AS score FROM __THIS__"
    )
    new Pipeline().setStages(Array(tensor, score)).fit(images)
  }

  /** The exact weight of each block. */
  val exact: Array[Double] =
    Array.tabulate(16)(b => if (b / 4 < 2 && b % 4 < 2) reds(b) / 255.0 / 4 else 0.0)
}

class ImageLIMESuite extends TransformerSuite[ImageLIME] {
  import ImageExplainerFixtures._

  override def testObjects: Seq[TestObject[ImageLIME]] = Seq(
    TestObject(
      new ImageLIME()
        .setModel(model)
        .setInputCol("image")
        .setTargetCol("score")
        .setNumSamples(40)
        .setCellSize(8.0),
      images,
      out => {
        val row = out.collect().head
        val weights = row.getAs[Seq[Vector]]("explanation").head.toArray
        assert(weights.zip(exact).forall { case (a, b) => math.abs(a - b) < 1e-6 }, weights.toSeq)
        val superpixels = row.getAs[Row]("superpixels")
        val labels = superpixels.getSeq[Int](2)
        assert(labels.toSeq == (0 until 1024).map(p => (p / 32 / 8) * 4 + p % 32 / 8))
        // the 32 x 32 struct resized to 32 x 32: the source itself
        assert(superpixels.getAs[Int]("sourceHeight") == 32)
        assert(superpixels.getAs[Int]("sourceWidth") == 32)
        assert(superpixels.getSeq[Double](5) == Seq(1.0, 0.0, 1.0, 0.0))
      },
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("where the model image lies in a 90 x 160 source, worked by hand") {
    def near(a: Array[Double], b: Seq[Double]) =
      assert(a.zip(b).forall { case (x, y) => math.abs(x - y) < 1e-12 }, a.toSeq)
    // resizeShorter(40): 40 x 71 (160 * 40 / 90 = 71.1); its 32 x 32 centre at row 4, column 19
    near(
      Superpixels.view(Seq(ResizeShorter(40), CenterCrop(32, 32)), 90, 160),
      Seq(71.0 / 160, -19.0, 40.0 / 90, -4.0)
    )
    // letterbox(32): scaled by 0.2 to 18 x 32, 7 rows of padding above
    near(Superpixels.view(Seq(Letterbox(32)), 90, 160), Seq(0.2, 0.0, 0.2, 7.0))
    // x: 50 -> 32 and 146 -> 0; y: 10 -> 32 and 74 -> 0
    near(
      Superpixels.view(Seq(Crop(50, 10, 64, 96), Resize(32, 32), Flip(-1)), 90, 160),
      Seq(-1.0 / 3, 32 + 50.0 / 3, -0.5, 37.0)
    )
    near(Superpixels.view(Seq(Flip(0)), 90, 160), Seq(1.0, 0.0, -1.0, 90.0))
    near(Superpixels.view(Nil, 90, 160), Seq(1.0, 0.0, 1.0, 0.0))
  }

  test("misuse fails before any job: no inputCol, a column that is not an image") {
    val noInput = intercept[IllegalArgumentException](
      new ImageLIME().setModel(model).setTargetCol("score").transformSchema(images.schema)
    )
    assert(noInput.getMessage.contains("must name the image column"))
    val notImage = intercept[IllegalArgumentException](
      new ImageLIME()
        .setModel(model)
        .setInputCol("image")
        .setTargetCol("score")
        .setSuperpixelCol("explanation")
        .transformSchema(images.schema)
    )
    assert(notImage.getMessage.contains("outputCol, metricsCol and superpixelCol"))
    intercept[IllegalArgumentException](new ImageLIME().setSamplingFraction(1.5))
  }
}

class ImageSHAPSuite extends TransformerSuite[ImageSHAP] {
  import ImageExplainerFixtures._

  override def testObjects: Seq[TestObject[ImageSHAP]] = Seq(
    TestObject(
      new ImageSHAP()
        .setModel(model)
        .setInputCol("image")
        .setTargetCol("score")
        .setNumSamples(40)
        .setCellSize(8.0),
      images,
      out => {
        val values = out.collect().head.getAs[Seq[Vector]]("explanation").head.toArray
        val expected = 0.0 +: exact
        assert(values.zip(expected).forall { case (a, b) => math.abs(a - b) < 1e-6 }, values.toSeq)
      },
      Streaming.Refused("streaming input is not supported")
    )
  )
}
