package mmlspark.explainers

import mmlspark.contracts.{Streaming, TestObject, TransformerSuite}
import org.apache.spark.ml.feature.SQLTransformer
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.sql.DataFrame

/** A text model as SQL: f = 2 [great] + [plot] + 0.5 [great][plot], whose Shapley values for "the
  * plot was great" are worked by hand (the interaction split evenly): great 2.25, plot 1.25, the
  * and was 0, base f("") = 0.
  */
object TextFixtures {
  import ExplainerFixtures.spark
  import spark.implicits._

  lazy val keyword: SQLTransformer = new SQLTransformer().setStatement(
    "SELECT *, 2 * g + p + 0.5 * g * p AS prediction FROM (SELECT *, " +
      "CAST(instr(text, 'great') > 0 AS DOUBLE) AS g, " +
      "CAST(instr(text, 'plot') > 0 AS DOUBLE) AS p FROM __THIS__)"
  )

  lazy val reviews: DataFrame = Seq("The plot  was GREAT", "", null).toDF("text")

  def explained(out: DataFrame): Map[Seq[String], Array[Double]] =
    out
      .collect()
      .filterNot(_.isNullAt(out.schema.fieldIndex("explanation")))
      .map(r => r.getAs[Seq[String]]("tokens") -> r.getAs[Seq[Vector]]("explanation").head.toArray)
      .toMap
}

class TextSHAPSuite extends TransformerSuite[TextSHAP] {
  import TextFixtures._

  override def testObjects: Seq[TestObject[TextSHAP]] = Seq(
    TestObject(
      new TextSHAP().setModel(keyword).setInputCol("text").setTargetCol("prediction"),
      reviews,
      out =>
        assert(
          out.count() == 3 && out.columns.toSeq == Seq("text", "tokens", "explanation", "r2")
        ),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("the exact Shapley values of the tokens, worked by hand; null outputs without tokens") {
    val out = new TextSHAP().setModel(keyword).setInputCol("text").setTargetCol("prediction")
    val got = explained(out.transform(reviews))
    assert(got.keySet == Set(Seq("the", "plot", "was", "great")))
    val values = got(Seq("the", "plot", "was", "great"))
    assert(ExplainerFixtures.close(values, Array(0.0, 0.0, 1.25, 0.0, 2.25), 1e-9), values.toSeq)
  }

  test("misuse fails before any job: no inputCol, not a string, tokensCol taken") {
    val stage = new TextSHAP().setModel(keyword).setTargetCol("prediction")
    val noInput = intercept[IllegalArgumentException](stage.transform(reviews))
    assert(noInput.getMessage.contains("'inputCol' must name the text column"))
    val numbers = spark.range(2).toDF("text")
    val notText = intercept[IllegalArgumentException](stage.setInputCol("text").transform(numbers))
    assert(notText.getMessage.contains("'text' must be string but was bigint"))
    val taken = intercept[IllegalArgumentException](stage.setTokensCol("text").transform(reviews))
    assert(taken.getMessage.contains("output column 'text' already exists"))
  }
}

class TextLIMESuite extends TransformerSuite[TextLIME] {
  import TextFixtures._

  override def testObjects: Seq[TestObject[TextLIME]] = Seq(
    TestObject(
      new TextLIME()
        .setModel(keyword)
        .setInputCol("text")
        .setTargetCol("prediction")
        .setNumSamples(50),
      reviews,
      out => assert(out.count() == 3),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("LIME ranks the keyword first, then the other word the model reads; the rest near 0") {
    val stage = new TextLIME()
      .setModel(keyword)
      .setInputCol("text")
      .setTargetCol("prediction")
      .setNumSamples(300)
    val weights = explained(stage.transform(reviews))(Seq("the", "plot", "was", "great"))
    assert(weights(3) > weights(1) && weights(1) > 0.8, weights.toSeq)
    assert(math.abs(weights(0)) < 0.2 && math.abs(weights(2)) < 0.2, weights.toSeq)
  }
}

class ICETransformerSuite extends TransformerSuite[ICETransformer] {
  import ExplainerFixtures.spark
  import spark.implicits._

  /** y = x^2 + 3 [c = 'b'] + z. */
  lazy val model: SQLTransformer = new SQLTransformer().setStatement(
    "SELECT *, x * x + CASE c WHEN 'b' THEN 3.0 ELSE 0.0 END + z AS prediction FROM __THIS__"
  )
  lazy val rows: DataFrame =
    Seq((0.0, "a", 1.0), (1.0, "b", 0.0), (2.0, "b", 2.0)).toDF("x", "c", "z")

  private def ice = new ICETransformer().setModel(model).setTargetCol("prediction")

  override def testObjects: Seq[TestObject[ICETransformer]] = Seq(
    TestObject(
      ice.setNumericFeatures(Array("""{"name": "x", "numSplits": 2}""")),
      rows,
      out => assert(out.count() == 3 && out.columns.last == "x_dependence"),
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("individual curves and their average, worked by hand") {
    val stage = ice
      .setNumericFeatures(Array("""{"name": "x", "numSplits": 2, "rangeMax": 4}"""))
      .setCategoricalFeatures(Array("c"))
    val curves = stage
      .transform(rows)
      .collect()
      .map { r =>
        val x = r.getAs[Map[Double, Vector]]("x_dependence").map { case (k, v) => k -> v(0) }
        val c = r.getAs[Map[String, Vector]]("c_dependence").map { case (k, v) => k -> v(0) }
        r.getDouble(0) -> (x, c)
      }
      .toMap
    // the row (2, b, 2): x over 0, 2, 4 gives 0 + 5, 4 + 5, 16 + 5; c over b (2 rows), a
    assert(curves(2.0)._1 == Map(0.0 -> 5.0, 2.0 -> 9.0, 4.0 -> 21.0))
    assert(curves(2.0)._2 == Map("b" -> 9.0, "a" -> 6.0))
    val average = stage.setKind("average").transform(rows).collect()
    assert(average.length == 1)
    val pdp = average.head.getAs[Map[Double, Vector]]("x_dependence").map { case (k, v) =>
      k -> v(0)
    }
    // mean of 3 [c = b] + z over the rows: (1 + 3 + 5) / 3 = 3
    assert(pdp == Map(0.0 -> 3.0, 2.0 -> 7.0, 4.0 -> 19.0))
  }

  test("misuse fails before any job: no features, a bad setting, a wrong type") {
    def message(stage: ICETransformer) =
      intercept[IllegalArgumentException](stage.transform(rows)).getMessage
    assert(message(ice).contains("no features"))
    assert(message(ice.setNumericFeatures(Array("""{"nam": "x"}"""))).contains("unknown key"))
    assert(
      message(ice.setCategoricalFeatures(Array("x")))
        .contains("must be a string, boolean or integer (a categorical feature) but was double")
    )
  }
}
