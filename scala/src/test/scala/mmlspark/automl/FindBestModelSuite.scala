package mmlspark.automl

import mmlspark.contracts.{EstimatorSuite, SparkTestSession, TestObject}
import mmlspark.train.{ComputeModelStatistics, TrainClassifier, TrainFixtures}
import org.apache.spark.ml.PipelineStage
import org.apache.spark.ml.classification.LogisticRegression

class FindBestModelSuite extends EstimatorSuite[FindBestModel, BestModel] {
  import TrainFixtures.people

  private lazy val candidates: Array[PipelineStage] = Array(
    new TrainClassifier()
      .setModel(new LogisticRegression().setRegParam(5.0))
      .setInputCols(Array("color"))
      .fit(people),
    new TrainClassifier()
      .setModel(new LogisticRegression())
      .setInputCols(Array("age", "member"))
      .fit(people)
  )

  private def accuracy(stage: PipelineStage): Double =
    new ComputeModelStatistics()
      .transform(stage.asInstanceOf[org.apache.spark.ml.Transformer].transform(people))
      .head()
      .getAs[Double]("accuracy")

  override def testObjects: Seq[TestObject[FindBestModel]] = Seq(
    TestObject(
      new FindBestModel().setModels(candidates),
      people,
      out => assert(out.columns.contains("prediction") && out.count() == 80)
    )
  )

  test("the most accurate candidate wins; every candidate's metrics and the ROC are kept") {
    val best = new FindBestModel().setModels(candidates).fit(people)
    val expected = candidates.maxBy(accuracy)
    assert(best.getBestModel.uid == expected.uid)
    val all = best.getAllModelMetrics.collect()
    assert(all.map(_.getAs[String]("model_uid")).toSet == candidates.map(_.uid).toSet)
    assert(best.getBestModelMetrics.head().getAs[Double]("accuracy") == accuracy(expected))
    val roc = best.getRocCurve.collect().map(r => (r.getDouble(0), r.getDouble(1)))
    assert(roc.head == ((0.0, 0.0)) && roc.last == ((1.0, 1.0)))
    val dir = SparkTestSession.tempDir("best-model") + "/saved"
    best.write.save(dir)
    val loaded = BestModel.load(dir)
    assert(
      loaded.getRocCurve.collect().map(r => (r.getDouble(0), r.getDouble(1))).toSeq == roc.toSeq
    )
    val uids = (m: BestModel) => m.getAllModelMetrics.collect().map(_.getAs[String]("model_uid"))
    assert(uids(loaded).toSeq == uids(best).toSeq)
    val byError = new FindBestModel().setModels(candidates).setEvaluationMetric("AUC").fit(people)
    assert(byError.getAllModelMetrics.count() == 2)
  }

  test("without column names the candidates' score metadata names the label") {
    val data = people.withColumnRenamed("label", "outcome")
    val models: Array[PipelineStage] = Array(Array("color"), Array("age", "member")).map { cols =>
      new TrainClassifier()
        .setModel(new LogisticRegression())
        .setLabelCol("outcome")
        .setInputCols(cols)
        .fit(data)
    }
    val best = new FindBestModel().setModels(models).fit(data)
    val accuracies = models.map { m =>
      val rows = m.asInstanceOf[org.apache.spark.ml.Transformer].transform(data).collect()
      rows.count(r => r.getAs[String]("prediction") == r.getAs[String]("outcome")).toDouble /
        rows.length
    }
    assert(best.getBestModel.uid == models(accuracies.indexOf(accuracies.max)).uid)
    assert(best.getBestModelMetrics.head().getAs[Double]("accuracy") == accuracies.max)
  }

  test(
    "unfitted candidates, a regression metric for classifiers, or no models fail before any job"
  ) {
    val unfitted = intercept[IllegalArgumentException](
      new FindBestModel()
        .setModels(Array(new TrainClassifier().setModel(new LogisticRegression())))
        .fit(people)
    )
    assert(unfitted.getMessage.contains("fit it first"))
    val wrong = intercept[IllegalArgumentException](
      new FindBestModel().setModels(candidates).setEvaluationMetric("r2").fit(people)
    )
    assert(wrong.getMessage.contains("must be numeric for a regression metric"))
    intercept[IllegalArgumentException](new FindBestModel().fit(people))
    intercept[IllegalArgumentException](new FindBestModel().setEvaluationMetric("bleu"))
  }
}
