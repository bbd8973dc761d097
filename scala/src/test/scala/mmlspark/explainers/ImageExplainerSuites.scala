package mmlspark.explainers

import mmlspark.contracts.{SparkTestSession, Streaming, TestObject, TransformerSuite}
import mmlspark.opencv.ImageTransformer
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
        val labels = row.getAs[Row]("superpixels").getSeq[Int](2)
        assert(labels.toSeq == (0 until 1024).map(p => (p / 32 / 8) * 4 + p % 32 / 8))
      },
      Streaming.Refused("streaming input is not supported")
    )
  )

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
