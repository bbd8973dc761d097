package mmlspark.opencv

import mmlspark.contracts.{SparkTestSession, StageChecks, TestObject, TransformerSuite}
import mmlspark.image.{ImageChecks, ImageDecoder, ImageFixtures}
import org.apache.spark.sql.{DataFrame, Row}

class ImageSetAugmenterSuite extends TransformerSuite[ImageSetAugmenter] {
  override def testObjects: Seq[TestObject[ImageSetAugmenter]] = Seq(
    TestObject(
      new ImageSetAugmenter().setFlipUpDown(true),
      ImageFixtures.images,
      out => {
        val rows = out.collect()
        val pattern =
          rows.filter(_.getAs[String]("path") == "pattern.png").map(_.getAs[Row]("augmented"))
        val (h, w) = (ImageFixtures.height, ImageFixtures.width)
        val got = pattern.map(ImageChecks.bytes).toSet
        val expected = Set(
          ImageFixtures.expectedBytes(),
          ImageFixtures.expectedBytes((y, x) => (y, w - 1 - x)),
          ImageFixtures.expectedBytes((y, x) => (h - 1 - y, x))
        )
        assert(pattern.length == 3 && got == expected)
        // Rows without an image stay, once each.
        assert(rows.count(_.getAs[String]("path") == "notes.jpg") == 1)
        assert(rows.length == 5)
      }
    )
  )

  test("the loaded stage keeps both flip switches") {
    val loaded =
      StageChecks.saveAndLoad(new ImageSetAugmenter().setFlipLeftRight(false).setFlipUpDown(true))
    assert(!loaded.getFlipLeftRight && loaded.getFlipUpDown)
  }

  test("a stage or pipeline saved as mmlspark.image.ImageSetAugmenter loads as this class") {
    import org.apache.spark.ml.{Pipeline, PipelineModel}
    val stage = new ImageSetAugmenter().setFlipUpDown(true)
    def flips(out: DataFrame): Seq[(String, Seq[Int])] = out
      .collect()
      .toSeq
      .filter(_.getAs[Row]("augmented") != null)
      .map(r => (r.getAs[String]("path"), ImageChecks.bytes(r.getAs[Row]("augmented"))))
    val expected = flips(stage.transform(ImageFixtures.images))
    val (h, w) = (ImageFixtures.height, ImageFixtures.width)
    assert(
      expected == Seq(
        ImageFixtures.expectedBytes(),
        ImageFixtures.expectedBytes((y, x) => (y, w - 1 - x)),
        ImageFixtures.expectedBytes((y, x) => (h - 1 - y, x))
      ).map(("pattern.png", _))
    )
    val dir = StageChecks.saveAndLoadPath(stage)
    StageChecks.savedAs(dir, "mmlspark.image.ImageSetAugmenter")
    val pipeline = SparkTestSession.tempDir("augmenter-pipeline") + "/saved"
    new Pipeline().setStages(Array(stage)).fit(ImageFixtures.images).write.save(pipeline)
    StageChecks.savedAs(
      new java.io.File(pipeline, "stages").listFiles().head.getPath,
      "mmlspark.image.ImageSetAugmenter"
    )
    val loaded = Seq(
      ImageSetAugmenter.load(dir),
      mmlspark.image.ImageSetAugmenter.load(dir),
      PipelineModel.load(pipeline).stages.head
    )
    loaded.foreach { l =>
      assert(l.getClass == classOf[ImageSetAugmenter] && l.uid == stage.uid)
      assert(flips(l.transform(ImageFixtures.images)) == expected)
    }
    // Another stage's save is still refused, naming the class found.
    val decoder = StageChecks.saveAndLoadPath(new ImageDecoder())
    val error = intercept[IllegalArgumentException](ImageSetAugmenter.load(decoder))
    assert(error.getMessage.contains("mmlspark.image.ImageDecoder"), error.getMessage)
  }
}
