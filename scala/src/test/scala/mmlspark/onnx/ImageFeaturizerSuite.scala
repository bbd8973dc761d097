package mmlspark.onnx

import mmlspark.contracts.{SparkTestSession, StageChecks, TestObject, TransformerSuite}
import mmlspark.image.{ImageChecks, ImageDecoder, ImageFixtures}
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.param.ParamMap

class ImageFeaturizerSuite extends TransformerSuite[ImageFeaturizer] {

  private def featurizer = new ImageFeaturizer()
    .setModelPayload(OnnxFixtures.bytes("small_cnn.onnx"))
    .setImageHeight(16)
    .setImageWidth(12)

  override def testObjects: Seq[TestObject[ImageFeaturizer]] = Seq(
    TestObject(
      featurizer.setFeatureTensorName("features").setDropNa(false),
      ImageFixtures.images,
      out => {
        val rows = ImageChecks.byPath(out)
        val features = rows("pattern.png").getAs[Vector]("features")
        // The cut model ends at Flatten(GlobalAveragePool(Relu(...))): 4 values, none negative.
        assert(features.size == 4 && features.toArray.forall(_ >= 0))
        assert(features.toArray.exists(_ > 0))
        assert(rows("notes.jpg").isNullAt(rows("notes.jpg").fieldIndex("features")))
        assert(rows("notes.jpg").getAs[String]("featurizeError").contains("no input image"))
        assert(out.columns.toSeq.takeRight(2) == Seq("features", "featurizeError"))
      }
    ),
    TestObject(
      featurizer.setFeatureTensorName("features"),
      ImageFixtures.images,
      out => assert(ImageChecks.byPath(out).keySet == Set("pattern.png"))
    )
  )

  private def features(out: org.apache.spark.sql.DataFrame): Map[String, Vector] =
    ImageChecks.byPath(out).map { case (p, r) => p -> r.getAs[Vector]("features") }

  test("by default rows without a vector are dropped; dropNa=false keeps them with the reason") {
    val kept = featurizer.setDropNa(false).transform(ImageFixtures.images)
    val dropped = featurizer.transform(ImageFixtures.images)
    assert(kept.count() == 3 && dropped.count() == 1)
    assert(features(dropped)("pattern.png") == features(kept)("pattern.png"))
  }

  test("undecodable bytes fail the transform unless ignoreDecodingErrors, as in SynapseML") {
    val onBytes = featurizer.setInputCol("content")
    val error = intercept[Exception](onBytes.transform(ImageFixtures.files).collect())
    val messages = Iterator.iterate[Throwable](error)(_.getCause).takeWhile(_ != null)
    assert(
      messages.exists(e =>
        e.getMessage != null && e.getMessage.contains("an image cannot be decoded") &&
          e.getMessage.contains("ignoreDecodingErrors")
      )
    )
    // Selecting only the vectors still checks (the check is a filter, not a column).
    intercept[Exception](onBytes.transform(ImageFixtures.files).select("features").collect())
    val kept = onBytes.setIgnoreDecodingErrors(true).setDropNa(false).transform(ImageFixtures.files)
    val rows = ImageChecks.byPath(kept)
    assert(rows.keySet == Set("pattern.png", "notes.jpg", "empty.jpg"))
    assert(rows("notes.jpg").isNullAt(rows("notes.jpg").fieldIndex("features")))
    assert(rows("notes.jpg").getAs[String]("featurizeError") != null)
    val decoded = features(featurizer.transform(ImageFixtures.images))("pattern.png")
    assert(rows("pattern.png").getAs[Vector]("features") == decoded)
    assert(onBytes.setDropNa(true).transform(ImageFixtures.files).count() == 1)
  }

  test("a gray image is converted to color unless autoConvertToColor=false") {
    val gray = new ImageDecoder()
      .setOriginCol("path")
      .setColorMode("grayscale")
      .transform(ImageFixtures.files)
      .drop("content")
    val asColor = features(featurizer.transform(gray))("pattern.png")
    // The same gray pixels given as a 3-channel image (GRAY2BGR) give the same vector.
    val color = new mmlspark.opencv.ImageTransformer()
      .setInputCol("image")
      .setOutputCol("image3")
      .colorFormat("BGR")
      .transform(gray)
      .drop("image")
      .withColumnRenamed("image3", "image")
    assert(features(featurizer.transform(color))("pattern.png") == asColor)
    val asGray = featurizer.setAutoConvertToColor(false).setDropNa(false).transform(gray)
    val row = ImageChecks.byPath(asGray)("pattern.png")
    assert(row.isNullAt(row.fieldIndex("features")))
    assert(row.getAs[String]("featurizeError") != null)
  }

  test("a stage saved before dropNa, ignoreDecodingErrors and autoConvertToColor works as it did") {
    val dir = StageChecks.savedWithout(
      featurizer.setFeatureTensorName("features"),
      Set("dropNa", "ignoreDecodingErrors", "autoConvertToColor"),
      "featurizer-old"
    )
    val loaded = ImageFeaturizer.load(dir)
    assert(!loaded.getDropNa && loaded.getIgnoreDecodingErrors && !loaded.getAutoConvertToColor)
    assert(loaded.transform(ImageFixtures.images).count() == 3)
    val fresh = ImageFeaturizer.load(
      StageChecks.saveAndLoadPath(featurizer.setFeatureTensorName("features"))
    )
    assert(fresh.getDropNa && !fresh.getIgnoreDecodingErrors && fresh.getAutoConvertToColor)
  }

  test("a node name and its output tensor cut the same model; no name keeps the whole model") {
    val byTensor = featurizer.setFeatureTensorName("features").transform(ImageFixtures.images)
    val byNode = featurizer.setFeatureTensorName("features_node").transform(ImageFixtures.images)
    ImageChecks.byPath(byTensor).foreach { case (path, row) =>
      assert(
        row.getAs[Vector]("features") == ImageChecks.byPath(byNode)(path).getAs[Vector]("features")
      )
    }
    val whole = ImageChecks.byPath(featurizer.transform(ImageFixtures.images))
    assert(whole("pattern.png").getAs[Vector]("features").size == 5) // the logits
  }

  test("cutting keeps only what the target needs, and ONNX Runtime runs the result") {
    val full = OnnxFixtures.bytes("small_cnn.onnx")
    val cut = OnnxGraph.cut(full, Seq("relu"))
    assert(cut.length < full.length) // the fully connected weights are gone
    assert(OnnxGraph.tensorNames(cut) == Seq("conv", "relu"))
    val model = new ONNXModel().setModelPayload(cut)
    assert(model.getModelOutputs.map(_.name) == Seq("relu"))
    assert(model.getModelInputs.map(_.name) == Seq("image"))
    val error = intercept[IllegalArgumentException](OnnxGraph.cut(full, Seq("nope")))
    assert(error.getMessage.contains("no node or tensor 'nope'"))
    assert(error.getMessage.contains("features_node"))
    val stage = intercept[IllegalArgumentException](
      featurizer.setFeatureTensorName("nope").transform(ImageFixtures.images)
    )
    assert(stage.getMessage.startsWith("ImageFeaturizer"))
  }

  test(
    "ONNX Runtime opens a model content once a JVM: a featurizer's cut model only, whatever the copies"
  ) {
    // small_cnn.onnx with a doc string of its own (a protobuf field appended): a content that no
    // other test has had inspected in this JVM, with the same graph.
    def fresh(): Array[Byte] = {
      val doc = java.util.UUID.randomUUID().toString.getBytes("UTF-8")
      OnnxFixtures.bytes("small_cnn.onnx") ++ Array[Byte](0x32, doc.length.toByte) ++ doc
    }
    val schema = ImageFixtures.images.schema
    def inspecting(body: => Unit): Long = {
      val before = ModelInfo.inspections
      body
      ModelInfo.inspections - before
    }
    val cut = featurizer.setModelPayload(fresh()).setFeatureTensorName("features")
    assert(inspecting {
      cut.transformSchema(schema); cut.copy(ParamMap.empty).transformSchema(schema)
    } == 1)
    val whole = featurizer.setModelPayload(fresh())
    assert(inspecting {
      whole.transformSchema(schema)
      whole.copy(ParamMap.empty).transformSchema(schema)
      new ONNXModel().setModelPayload(whole.getModelPayload.clone()).getModelInputs
    } == 1)
    // What inspecting proves still fails before any job, naming the stage: bytes that are no model.
    val broken = featurizer.setModelPayload(Array.fill[Byte](64)(7))
    for (stage <- Seq(broken, broken.copy(ParamMap.empty).setFeatureTensorName("features"))) {
      val error = intercept[IllegalArgumentException](stage.transformSchema(schema))
      assert(error.getMessage.startsWith("ImageFeaturizer"), error.getMessage)
    }
    assert(
      features(cut.transform(ImageFixtures.images)) == features(
        featurizer.setFeatureTensorName("features").transform(ImageFixtures.images)
      )
    )
  }

  test("a stage or pipeline saved as mmlspark.image.ImageFeaturizer loads as this class") {
    import org.apache.spark.ml.{Pipeline, PipelineModel}
    val stage = featurizer.setFeatureTensorName("features").setDropNa(false)
    val expected = features(stage.transform(ImageFixtures.images))
    val dir = StageChecks.saveAndLoadPath(stage)
    StageChecks.savedAs(dir, "mmlspark.image.ImageFeaturizer")
    val pipeline = SparkTestSession.tempDir("featurizer-pipeline") + "/saved"
    new Pipeline().setStages(Array(stage)).fit(ImageFixtures.images).write.save(pipeline)
    StageChecks.savedAs(
      new java.io.File(pipeline, "stages").listFiles().head.getPath,
      "mmlspark.image.ImageFeaturizer"
    )
    val loaded = Seq(
      ImageFeaturizer.load(dir),
      mmlspark.image.ImageFeaturizer.load(dir),
      PipelineModel.load(pipeline).stages.head
    )
    loaded.foreach { l =>
      assert(l.getClass == classOf[ImageFeaturizer] && l.uid == stage.uid)
      assert(features(l.transform(ImageFixtures.images)) == expected)
    }
    // Another stage's save is still refused, naming the class found.
    val decoder = StageChecks.saveAndLoadPath(new ImageDecoder())
    val error = intercept[IllegalArgumentException](ImageFeaturizer.load(decoder))
    assert(error.getMessage.contains("mmlspark.image.ImageDecoder"), error.getMessage)
  }
}
