package mmlspark.image

import mmlspark.contracts.{TestObject, TransformerSuite}
import mmlspark.onnx.{ONNXModel, OnnxFixtures, OnnxGraph}
import org.apache.spark.ml.linalg.Vector

class ImageFeaturizerSuite extends TransformerSuite[ImageFeaturizer] {

  private def featurizer = new ImageFeaturizer()
    .setModelPayload(OnnxFixtures.bytes("small_cnn.onnx"))
    .setImageHeight(16)
    .setImageWidth(12)

  override def testObjects: Seq[TestObject[ImageFeaturizer]] = Seq(
    TestObject(
      featurizer.setFeatureTensorName("features"),
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
    )
  )

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
}
