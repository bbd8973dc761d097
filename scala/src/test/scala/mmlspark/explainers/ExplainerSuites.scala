package mmlspark.explainers

import mmlspark.contracts.{SparkTestSession, Streaming, TestObject, TransformerSuite}
import org.apache.spark.ml.{Pipeline, PipelineModel}
import org.apache.spark.ml.feature.{SQLTransformer, VectorAssembler}
import org.apache.spark.ml.linalg.{Vector, Vectors}
import org.apache.spark.ml.regression.{LinearRegression, LinearRegressionModel}
import org.apache.spark.sql.DataFrame

/** Small data and models: three features, a linear target (y = 1 + 2a - 3b + 0.5c), and a
  * background of four rows whose means are (1, 1, 1) and whose population standard deviations are
  * (sqrt(0.5), sqrt(1.5), sqrt(1.5)).
  */
object ExplainerFixtures {
  lazy val spark = SparkTestSession.spark
  import SparkTestSession.spark.implicits._

  val coefficients: Array[Double] = Array(2.0, -3.0, 0.5)

  lazy val rows: DataFrame =
    Seq((1.0, 2.0, 0.0), (3.0, -1.0, 2.0), (0.0, 0.0, 1.0)).toDF("a", "b", "c")

  lazy val background: DataFrame =
    Seq((0.0, 0.0, 0.0), (2.0, 1.0, 1.0), (1.0, 3.0, 0.0), (1.0, 0.0, 3.0)).toDF("a", "b", "c")

  val means: Array[Double] = Array(1.0, 1.0, 1.0)
  val stds: Array[Double] = Array(math.sqrt(0.5), math.sqrt(1.5), math.sqrt(1.5))

  lazy val assembler: VectorAssembler =
    new VectorAssembler().setInputCols(Array("a", "b", "c")).setOutputCol("features")

  /** The model as SQL: exact in binary, so every run of an explainer gives the same bits. */
  lazy val exact: SQLTransformer =
    new SQLTransformer().setStatement(
      "SELECT *, 1 + 2 * a - 3 * b + 0.5 * c AS prediction FROM __THIS__"
    )

  /** A linear regression fitted on noise-free data of the target. */
  lazy val regression: PipelineModel = {
    val train = (0 until 12)
      .map { i =>
        val (a, b, c) = (i % 3 - 1.0, (i * 7 % 5) / 2.0, (i * 3 % 4) - 1.5)
        (a, b, c, 1 + 2 * a - 3 * b + 0.5 * c)
      }
      .toDF("a", "b", "c", "label")
    new Pipeline().setStages(Array(assembler, new LinearRegression())).fit(train)
  }

  def fitted: LinearRegressionModel = regression.stages(1).asInstanceOf[LinearRegressionModel]

  def vectors(df: DataFrame): DataFrame = assembler.transform(df).select("features")

  def explanations(out: DataFrame, col: String): Seq[Vector] =
    out.orderBy("a").collect().map(_.getAs[Seq[Vector]](col).head).toSeq

  def close(a: Array[Double], b: Array[Double], tolerance: Double): Boolean =
    a.length == b.length && a.zip(b).forall { case (x, y) => math.abs(x - y) <= tolerance }
}

class TabularSHAPSuite extends TransformerSuite[TabularSHAP] {
  import ExplainerFixtures._

  override def testObjects: Seq[TestObject[TabularSHAP]] = Seq(
    TestObject(
      new TabularSHAP()
        .setModel(exact)
        .setInputCols(Array("a", "b", "c"))
        .setTargetCol("prediction")
        .setOutputCol("shap")
        .setBackgroundData(background),
      rows,
      out => assert(out.count() == 3 && out.columns.toSeq == Seq("a", "b", "c", "shap", "r2")),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("exact Shapley values of a fitted linear model: coef * (x - background mean)") {
    val model = fitted
    val w = model.coefficients.toArray
    val base = model.intercept + w.zip(means).map { case (c, m) => c * m }.sum
    val out = new TabularSHAP()
      .setModel(regression)
      .setInputCols(Array("a", "b", "c"))
      .setTargetCol("prediction")
      .setOutputCol("shap")
      .setBackgroundData(background)
      .transform(rows)
    val got = out.orderBy("a").collect()
    got.foreach { r =>
      val x = Array(r.getAs[Double]("a"), r.getAs[Double]("b"), r.getAs[Double]("c"))
      val expected = base +: w.indices.map(i => w(i) * (x(i) - means(i))).toArray
      val shap = r.getAs[Seq[Vector]]("shap").head.toArray
      assert(close(shap, expected, 1e-6), s"${shap.toSeq} vs ${expected.toSeq}")
      assert(math.abs(r.getAs[Vector]("r2")(0) - 1.0) < 1e-6)
    }
    assert(w.zip(coefficients).forall { case (a, b) => math.abs(a - b) < 1e-6 })
  }

  test("misuse fails before any job: no inputCols, a target the model does not give") {
    val noInputs = intercept[IllegalArgumentException](
      new TabularSHAP().setModel(exact).setTargetCol("prediction").transformSchema(rows.schema)
    )
    assert(noInputs.getMessage.contains("inputCols"))
    val noTarget = intercept[IllegalArgumentException](
      new TabularSHAP().setModel(exact).setInputCols(Array("a")).transformSchema(rows.schema)
    )
    assert(noTarget.getMessage.contains("probability"))
    intercept[IllegalArgumentException](new TabularSHAP().setNumSamples(0))
  }
}

class VectorSHAPSuite extends TransformerSuite[VectorSHAP] {
  import ExplainerFixtures._

  override def testObjects: Seq[TestObject[VectorSHAP]] = Seq(
    TestObject(
      new VectorSHAP()
        .setModel(new Pipeline().setStages(Array(fitted)).fit(vectors(background)))
        .setInputCol("features")
        .setTargetCol("prediction")
        .setBackgroundData(vectors(background)),
      vectors(rows),
      out => assert(out.count() == 3),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("exact Shapley values of a vector model, sampled ones close to them") {
    val model = fitted
    val w = model.coefficients.toArray
    val base = model.intercept + w.zip(means).map { case (c, m) => c * m }.sum
    def shap(samples: Option[Int]) = {
      val stage = new VectorSHAP()
        .setModel(model)
        .setInputCol("features")
        .setTargetCol("prediction")
        .setOutputCol("shap")
        .setBackgroundData(vectors(background))
      samples.foreach(stage.setNumSamples)
      stage.transform(vectors(rows)).collect().map { r =>
        (r.getAs[Vector]("features").toArray, r.getAs[Seq[Vector]]("shap").head.toArray)
      }
    }
    shap(None).foreach { case (x, got) =>
      val expected = base +: w.indices.map(i => w(i) * (x(i) - means(i))).toArray
      assert(close(got, expected, 1e-6), s"${got.toSeq} vs ${expected.toSeq}")
    }
  }
}

class TabularLIMESuite extends TransformerSuite[TabularLIME] {
  import ExplainerFixtures._

  override def testObjects: Seq[TestObject[TabularLIME]] = Seq(
    TestObject(
      new TabularLIME()
        .setModel(exact)
        .setInputCols(Array("a", "b", "c"))
        .setTargetCol("prediction")
        .setNumSamples(20)
        .setBackgroundData(background),
      rows,
      out => assert(out.count() == 3),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("LIME recovers a linear model's coefficients, per background standard deviation") {
    val out = new TabularLIME()
      .setModel(regression)
      .setInputCols(Array("a", "b", "c"))
      .setTargetCol("prediction")
      .setOutputCol("lime")
      .setNumSamples(40)
      .setBackgroundData(background)
      .transform(rows)
    val expected = fitted.coefficients.toArray.zip(stds).map { case (c, s) => c * s }
    explanations(out, "lime").foreach { v =>
      assert(close(v.toArray, expected, 1e-6), s"$v vs ${expected.toSeq}")
    }
    out.collect().foreach(r => assert(math.abs(r.getAs[Vector]("r2")(0) - 1.0) < 1e-6))
  }

  test("a categorical feature is explained by 'the same value as the row'") {
    val out = new TabularLIME()
      .setModel(exact)
      .setInputCols(Array("a", "b", "c"))
      .setCategoricalFeatures(Array("a"))
      .setTargetCol("prediction")
      .setOutputCol("lime")
      .setNumSamples(200)
      .setBackgroundData(background)
      .transform(rows)
    // y = 2a + ...: "a is the row's category" is worth 2 * (a - the other categories' mean),
    // which the background's frequencies give: 0 for a = 1 (0 and 2 alike), -8/3 for a = 0
    val byA =
      out.collect().map(r => r.getAs[Double]("a") -> r.getAs[Seq[Vector]]("lime").head).toMap
    assert(math.abs(byA(1.0)(0)) < 0.8 && byA(0.0)(0) < -1.5, byA)
    assert(close(byA(0.0).toArray.tail, Array(-3.0 * stds(1), 0.5 * stds(2)), 0.5), byA)
  }
}

class VectorLIMESuite extends TransformerSuite[VectorLIME] {
  import ExplainerFixtures._

  override def testObjects: Seq[TestObject[VectorLIME]] = Seq(
    TestObject(
      new VectorLIME()
        .setModel(fitted)
        .setInputCol("features")
        .setTargetCol("prediction")
        .setNumSamples(20)
        .setBackgroundData(vectors(background)),
      vectors(rows),
      out => assert(out.count() == 3),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("LIME on vectors recovers the coefficients, per standard deviation") {
    val out = new VectorLIME()
      .setModel(fitted)
      .setInputCol("features")
      .setTargetCol("prediction")
      .setOutputCol("lime")
      .setNumSamples(30)
      .setRegularization(0.0)
      .setBackgroundData(vectors(background))
      .transform(vectors(rows))
    val expected = fitted.coefficients.toArray.zip(stds).map { case (c, s) => c * s }
    out.collect().foreach { r =>
      val v = r.getAs[Seq[Vector]]("lime").head
      assert(close(v.toArray, expected, 1e-6), s"$v vs ${expected.toSeq}")
    }
  }
}
