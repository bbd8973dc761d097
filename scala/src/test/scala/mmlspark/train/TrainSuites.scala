package mmlspark.train

import mmlspark.contracts.{
  EstimatorSuite,
  SparkTestSession,
  Streaming,
  TestObject,
  TransformerSuite
}
import org.apache.spark.ml.classification.LogisticRegression
import org.apache.spark.ml.evaluation.{BinaryClassificationEvaluator, RegressionEvaluator}
import org.apache.spark.ml.feature.StringIndexer
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.regression.LinearRegression
import org.apache.spark.sql.{DataFrame, Row}

object TrainFixtures {

  /** People with a numeric, a categorical, a boolean and an array column, some nulls; the label
    * depends on age and membership only.
    */
  lazy val people: DataFrame = {
    val spark = SparkTestSession.spark
    import spark.implicits._
    val colors = Seq("red", "green", "blue", null)
    (0 until 80)
      .map { i =>
        val age = if (i % 17 == 5) None else Some(18.0 + (i * 7) % 60)
        val member = i % 3 == 0
        val label = if (age.getOrElse(47.0) + (if (member) 15 else 0) > 50) "yes" else "no"
        (
          i.toLong,
          age,
          colors(i % 4),
          member,
          Seq(i % 5 * 1.0, 1.0),
          label,
          age.getOrElse(47.0) * 2 + 1
        )
      }
      .toDF("id", "age", "color", "member", "extra", "label", "spend")
  }

  def byId(df: DataFrame): Map[Long, Row] = df.collect().map(r => r.getAs[Long]("id") -> r).toMap
}

class TrainClassifierSuite extends EstimatorSuite[TrainClassifier, TrainedClassifierModel] {
  import TrainFixtures._

  override def testObjects: Seq[TestObject[TrainClassifier]] = Seq(
    TestObject(
      new TrainClassifier()
        .setModel(new LogisticRegression().setMaxIter(50))
        .setInputCols(Array("age", "color", "member", "extra")),
      people,
      out => {
        val rows = out.collect()
        assert(rows.length == 80)
        val accuracy =
          rows.count(r => r.getAs[String]("prediction") == r.getAs[String]("label")).toDouble / 80
        assert(accuracy >= 0.9, s"accuracy $accuracy")
        assert(rows.forall(r => r.getAs[Vector]("probability").size == 2))
        assert(
          out.columns.toSeq == people.columns.toSeq ++ Seq(
            "rawPrediction",
            "probability",
            "prediction"
          )
        )
      }
    )
  )

  test("predictions come back as the label's values, classes sorted, unseen categories scored") {
    val model = new TrainClassifier()
      .setModel(new LogisticRegression())
      .setInputCols(Array("age", "color", "member"))
      .fit(people)
    assert(model.getLevels.toSeq == Seq("no", "yes"))
    val spark = SparkTestSession.spark
    import spark.implicits._
    val fresh = Seq((1L, Option(70.0), "purple", true), (2L, Option.empty[Double], null, false))
      .toDF("id", "age", "color", "member")
    val scored = byId(model.transform(fresh))
    assert(scored(1L).getAs[String]("prediction") == "yes")
    assert(Set("yes", "no").contains(scored(2L).getAs[String]("prediction")))
    assert(
      MetricParams.classes(model.transform(fresh).schema("prediction").metadata).get.toSeq == Seq(
        "no",
        "yes"
      )
    )
  }

  test("numeric labels keep their type; null labels are dropped") {
    val data = people.selectExpr(
      "id",
      "age",
      "member",
      "CASE WHEN id % 10 = 0 THEN NULL WHEN label = 'yes' THEN 7 ELSE 3 END AS label"
    )
    val model = new TrainClassifier().setModel(new LogisticRegression()).fit(data)
    assert(model.getLevels.toSeq == Seq("3", "7"))
    val out = model.transform(data)
    assert(out.schema("prediction").dataType == org.apache.spark.sql.types.IntegerType)
    assert(out.collect().forall(r => Set(3, 7).contains(r.getAs[Int]("prediction"))))
  }

  test("a wrong model, label or feature type fails before any job") {
    val noModel = intercept[IllegalArgumentException](new TrainClassifier().fit(people))
    assert(noModel.getMessage.contains("'model' must be set"))
    val regressor = intercept[IllegalArgumentException](
      new TrainClassifier().setModel(new LinearRegression()).fit(people)
    )
    assert(regressor.getMessage.contains("must be a Spark ML classifier"))
    val map = people.selectExpr("id", "map('a', 1) AS m", "label")
    val badType = intercept[IllegalArgumentException](
      new TrainClassifier().setModel(new LogisticRegression()).fit(map)
    )
    assert(
      badType.getMessage.contains(
        "input column 'm' must be numeric, boolean, string, array<numeric> or vector"
      )
    )
    intercept[IllegalArgumentException](
      new TrainClassifier().setModel(new StringIndexer()).fit(people)
    )
  }

  test("statistics find label, prediction and probability from the model's score metadata") {
    val data = people.withColumnRenamed("label", "outcome")
    val model = new TrainClassifier()
      .setModel(new LogisticRegression())
      .setLabelCol("outcome")
      .setInputCols(Array("age", "color", "member"))
      .fit(data)
    val scored = model.transform(data)
    val rows = scored.collect()
    val stats = new ComputeModelStatistics().transform(scored).head()
    val accuracy = rows.count(r => r.getAs[String]("prediction") == r.getAs[String]("outcome"))
    assert(stats.getAs[Double]("accuracy") == accuracy.toDouble / rows.length)
    val auc = new BinaryClassificationEvaluator()
      .setLabelCol("y")
      .setRawPredictionCol("probability")
      .evaluate(scored.selectExpr("probability", "CAST(outcome = 'yes' AS DOUBLE) AS y"))
    assert(math.abs(stats.getAs[Double]("AUC") - auc) < 1e-12)
    val losses = new ComputePerInstanceStatistics().transform(scored).collect()
    losses.foreach { r =>
      val p = r.getAs[Vector]("probability")(if (r.getAs[String]("outcome") == "yes") 1 else 0)
      assert(math.abs(r.getAs[Double]("log_loss") + math.log(p)) < 1e-9)
    }
    val missing = intercept[IllegalArgumentException](
      new ComputeModelStatistics().transform(data.withColumnRenamed("label", "x"))
    )
    assert(missing.getMessage.contains("labelCol is not set"))
    assert(missing.getMessage.contains("scoredLabelsCol"))
  }

  test("free-text strings are hashed into numFeatures buckets, short ones one-hot; overridable") {
    val spark = SparkTestSession.spark
    import spark.implicits._
    val words = Seq("good", "bad", "fine", "great", "awful", "meh", "ok", "nice")
    val data = (0 until 60)
      .map { i =>
        val review = (0 to i % 4 + 1).map(k => words((i * 7 + k * 3) % words.size)).mkString(" ")
        (s"$review #$i", Seq("red", "green", "blue")(i % 3), if (i % 2 == 0) "a" else "b")
      }
      .toDF("review", "color", "label")
    def fit(estimator: TrainClassifier) =
      estimator.setModel(new LogisticRegression().setMaxIter(5)).setFeaturesCol("feats").fit(data)
    def width(model: TrainedClassifierModel) =
      model.transform(data).head().getAs[Vector]("feats").size
    val auto = fit(new TrainClassifier().setNumFeatures(64))
    assert(auto.getTextCols.toSeq == Seq("review"))
    assert(auto.getCategoricalCols.toSeq == Seq("color"))
    val colorOnly = fit(new TrainClassifier().setInputCols(Array("color")))
    assert(width(auto) == 64 + width(colorOnly))
    val forced = fit(new TrainClassifier().setNumFeatures(64).setCategoricalCols(Array("review")))
    assert(forced.getTextCols.isEmpty)
    assert(width(forced) > 60) // one category per distinct review
    val asText = fit(new TrainClassifier().setNumFeatures(16).setTextCols(Array("color")))
    assert(asText.getTextCols.toSeq == Seq("review", "color"))
    assert(width(asText) == 32)
    val notString = intercept[IllegalArgumentException](
      fit(new TrainClassifier().setTextCols(Array("label")))
    )
    assert(notString.getMessage.contains("not a string input column"))
  }

  test("labels orders the classes; reindexLabel false uses a numeric label as the class index") {
    val ordered = new TrainClassifier()
      .setModel(new LogisticRegression())
      .setInputCols(Array("age", "member"))
      .setLabels(Array("yes", "no"))
      .fit(people)
    assert(ordered.getLevels.toSeq == Seq("yes", "no"))
    ordered.transform(people).collect().foreach { r =>
      assert((r.getAs[Vector]("probability")(0) > 0.5) == (r.getAs[String]("prediction") == "yes"))
    }
    val data = people.selectExpr("age", "member", "IF(label = 'yes', 2, 0) AS label")
    def classes(reindex: Boolean) = {
      val model = new TrainClassifier()
        .setModel(new LogisticRegression())
        .setReindexLabel(reindex)
        .fit(data)
      (model.getLevels.toSeq, model.transform(data).head().getAs[Vector]("probability").size)
    }
    assert(classes(reindex = true) == ((Seq("0", "2"), 2)))
    assert(classes(reindex = false) == ((Seq("0", "1", "2"), 3)))
    val text = intercept[IllegalArgumentException](
      new TrainClassifier().setModel(new LogisticRegression()).setReindexLabel(false).fit(people)
    )
    assert(text.getMessage.contains("must be a numeric class index"))
    val unknown = intercept[IllegalArgumentException](
      new TrainClassifier()
        .setModel(new LogisticRegression())
        .setLabels(Array("yes", "maybe"))
        .fit(people)
    )
    assert(unknown.getMessage.contains("'no' are not in labels"))
  }
}

class TrainRegressorSuite extends EstimatorSuite[TrainRegressor, TrainedRegressorModel] {
  import TrainFixtures._

  override def testObjects: Seq[TestObject[TrainRegressor]] = Seq(
    TestObject(
      new TrainRegressor()
        .setModel(new LinearRegression())
        .setLabelCol("spend")
        .setInputCols(Array("age", "color")),
      people,
      out => {
        // spend = 2 * age + 1 where age is known; rows without it have no label and are not
        // trained on, but are scored (age imputed by the training mean).
        val rows = out.collect()
        assert(rows.length == 80)
        rows.filter(_.getAs[Any]("age") != null).foreach { r =>
          assert(math.abs(r.getAs[Double]("prediction") - r.getAs[Double]("spend")) < 0.1)
        }
      }
    )
  )

  test("statistics find the label and prediction of a trained regressor by its metadata") {
    val model = new TrainRegressor()
      .setModel(new LinearRegression())
      .setLabelCol("spend")
      .setInputCols(Array("color", "member"))
      .fit(people)
    val scored = model.transform(people)
    val stats = new ComputeModelStatistics().transform(scored).head()
    val mse = new RegressionEvaluator()
      .setLabelCol("spend")
      .setMetricName("mse")
      .evaluate(scored)
    assert(math.abs(stats.getAs[Double]("mean_squared_error") - mse) < 1e-9)
    val l1 = new ComputePerInstanceStatistics().transform(scored).collect()
    l1.foreach(r =>
      assert(
        r.getAs[Double]("L1_loss") == math.abs(
          r.getAs[Double]("prediction") - r.getAs[Double]("spend")
        )
      )
    )
  }
}

class ComputeModelStatisticsSuite extends TransformerSuite[ComputeModelStatistics] {

  private def scored: DataFrame = {
    val spark = SparkTestSession.spark
    import spark.implicits._
    Seq(("a", "a"), ("a", "b"), ("b", "b"), ("b", "b"), ("c", "a"), ("c", "c"))
      .toDF("label", "prediction")
  }

  override def testObjects: Seq[TestObject[ComputeModelStatistics]] = Seq(
    TestObject(
      new ComputeModelStatistics(),
      scored,
      out => {
        val r = out.head()
        assert(r.getAs[Double]("accuracy") == 4.0 / 6)
        assert(r.getSeq[String](r.fieldIndex("labels")) == Seq("a", "b", "c"))
        assert(
          r.getSeq[Seq[Long]](r.fieldIndex("confusion_matrix")) == Seq(
            Seq(1L, 1L, 0L),
            Seq(0L, 2L, 0L),
            Seq(1L, 0L, 1L)
          )
        )
        // precision a = 1/2, b = 2/3, c = 1; recall a = 1/2, b = 1, c = 1/2
        assert(math.abs(r.getAs[Double]("precision") - (0.5 + 2.0 / 3 + 1) / 3) < 1e-12)
        assert(math.abs(r.getAs[Double]("recall") - (0.5 + 1 + 0.5) / 3) < 1e-12)
        assert(r.isNullAt(r.fieldIndex("AUC")))
      },
      Streaming.Refused("writeStream")
    )
  )

  test("regression metrics; a regression metric on string predictions fails before any job") {
    val spark = SparkTestSession.spark
    import spark.implicits._
    val df = Seq((1.0, 1.5), (2.0, 2.0), (3.0, 2.0)).toDF("label", "prediction")
    val r = new ComputeModelStatistics().setEvaluationMetric("regression").transform(df).head()
    assert(math.abs(r.getAs[Double]("mean_squared_error") - (0.25 + 0 + 1) / 3) < 1e-12)
    assert(math.abs(r.getAs[Double]("mean_absolute_error") - 0.5) < 1e-12)
    val error = intercept[IllegalArgumentException](
      new ComputeModelStatistics().setEvaluationMetric("regression").transform(scored)
    )
    assert(error.getMessage.contains("must be numeric for a regression metric"))
  }
}

class ComputePerInstanceStatisticsSuite extends TransformerSuite[ComputePerInstanceStatistics] {

  override def testObjects: Seq[TestObject[ComputePerInstanceStatistics]] = {
    val spark = SparkTestSession.spark
    import spark.implicits._
    Seq(
      TestObject(
        new ComputePerInstanceStatistics(),
        Seq((1L, 1.0, 1.5), (2L, 2.0, 2.0), (3L, 3.0, 1.0)).toDF("id", "label", "prediction"),
        out => {
          val rows = TrainFixtures.byId(out)
          assert(
            rows(1L).getAs[Double]("L1_loss") == 0.5 && rows(3L).getAs[Double]("L2_loss") == 4.0
          )
        }
      )
    )
  }
}
