package mmlspark.featurize

import mmlspark.contracts.{
  EstimatorSuite,
  SparkTestSession,
  Streaming,
  TestObject,
  TransformerSuite
}
import org.apache.spark.ml.attribute.{Attribute, NominalAttribute}
import org.apache.spark.ml.feature.IndexToString
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.types.IntegerType

object Fixtures {
  import SparkTestSession.spark.implicits._

  /** id, a double (a null and a NaN), an int (a null) and a string (two nulls). */
  def gaps: DataFrame = Seq(
    (0, Some(1.0), Some(1), Some("x")),
    (1, None, Some(2), None),
    (2, Some(3.0), None, Some("y")),
    (3, Some(Double.NaN), Some(4), Some("z")),
    (4, Some(6.0), Some(6), None)
  ).toDF("id", "a", "b", "s")

  /** id, a string (a null), an int (a null) and a double (a NaN). */
  def values: DataFrame = Seq(
    (0, Some("b"), Some(3), 2.5),
    (1, Some("a"), Some(1), Double.NaN),
    (2, None, Some(3), 1.0),
    (3, Some("c"), None, 2.5),
    (4, Some("a"), Some(2), 1.0)
  ).toDF("id", "s", "n", "d")

  def byId(out: DataFrame, column: String): Map[Int, Any] =
    out.select("id", column).collect().map(r => r.getInt(0) -> r.get(1)).toMap
}

class CleanMissingDataSuite extends EstimatorSuite[CleanMissingData, CleanMissingDataModel] {
  import Fixtures._

  // Hand-worked: the mean of a's values 1, 3, 6 (NaN is missing) is 10/3, b's (1, 2, 4, 6) 13/4,
  // truncated to 3 in an int column; the approximate median is the lower middle value (3 and 2).
  override def testObjects: Seq[TestObject[CleanMissingData]] = Seq(
    TestObject(
      new CleanMissingData().setInputCols(Array("a", "b")).setOutputCols(Array("a2", "b2")),
      gaps,
      out => {
        assert(byId(out, "a2") == Map(0 -> 1.0, 1 -> 10.0 / 3, 2 -> 3.0, 3 -> 10.0 / 3, 4 -> 6.0))
        assert(byId(out, "b2") == Map(0 -> 1, 1 -> 2, 2 -> 3, 3 -> 4, 4 -> 6))
        assert(byId(out, "b")(2) == null)
      }
    ),
    TestObject(
      new CleanMissingData().setInputCols(Array("a", "b")).setCleaningMode("Median"),
      gaps,
      out => {
        assert(out.columns.toSeq == Seq("id", "a", "b", "s"))
        assert(byId(out, "a") == Map(0 -> 1.0, 1 -> 3.0, 2 -> 3.0, 3 -> 3.0, 4 -> 6.0))
        assert(byId(out, "b") == Map(0 -> 1, 1 -> 2, 2 -> 2, 3 -> 4, 4 -> 6))
      }
    ),
    TestObject(
      new CleanMissingData()
        .setInputCols(Array("s", "b"))
        .setOutputCols(Array("s2", "b2"))
        .setCleaningMode("Custom")
        .setCustomValue("7"),
      gaps,
      out => {
        assert(byId(out, "s2") == Map(0 -> "x", 1 -> "7", 2 -> "y", 3 -> "z", 4 -> "7"))
        assert(byId(out, "b2") == Map(0 -> 1, 1 -> 2, 2 -> 7, 3 -> 4, 4 -> 6))
      }
    )
  )

  test("the model holds the fill values as text") {
    val model = new CleanMissingData().setInputCols(Array("b")).setCleaningMode("Median").fit(gaps)
    assert(model.getFillValues.toSeq == Seq("2"))
  }

  test("misuse fails before any job, naming the stage") {
    def refused(stage: CleanMissingData, fragment: String): Unit = {
      val error = intercept[IllegalArgumentException](stage.transformSchema(gaps.schema))
      assert(error.getMessage.contains(stage.uid) && error.getMessage.contains(fragment))
    }
    refused(
      new CleanMissingData().setInputCols(Array("a", "b")).setOutputCols(Array("x")),
      "2 inputCols but 1 outputCols"
    )
    refused(new CleanMissingData().setInputCols(Array("s")), "'s' must be a numeric type")
    refused(new CleanMissingData().setInputCols(Array("nope")), "'nope' does not exist")
    refused(
      new CleanMissingData().setInputCols(Array("s")).setCleaningMode("Custom"),
      "customValue"
    )
    refused(new CleanMissingData(), "param 'inputCols' must be set")
    intercept[IllegalArgumentException](new CleanMissingData().setCleaningMode("mean"))
  }

  test("a column without a value to average fails when fitting") {
    val error = intercept[IllegalArgumentException](
      new CleanMissingData().setInputCols(Array("a")).fit(gaps.where("id = 1"))
    )
    assert(error.getMessage.contains("column 'a' has no non-missing value to take the mean of"))
  }
}

class ValueIndexerSuite extends EstimatorSuite[ValueIndexer, ValueIndexerModel] {
  import Fixtures._

  override def testObjects: Seq[TestObject[ValueIndexer]] = Seq(
    TestObject(
      new ValueIndexer().setInputCol("s").setOutputCol("i"),
      values,
      out => {
        // levels a, b, c; the null gets 3
        assert(byId(out, "i") == Map(0 -> 1, 1 -> 0, 2 -> 3, 3 -> 2, 4 -> 0))
        val attribute = Attribute.fromStructField(out.schema("i")).asInstanceOf[NominalAttribute]
        assert(attribute.values.get.toSeq == Seq("a", "b", "c"))
      }
    ),
    TestObject(
      new ValueIndexer().setInputCol("d").setOutputCol("i"),
      values,
      out => assert(byId(out, "i") == Map(0 -> 1, 1 -> 2, 2 -> 0, 3 -> 1, 4 -> 0))
    )
  )

  test("the model's levels, type and missing flag; unseen values index after the missing one") {
    import SparkTestSession.spark.implicits._
    val model = new ValueIndexer().setInputCol("n").setOutputCol("i").fit(values)
    assert(model.getLevels.toSeq == Seq("1", "2", "3"))
    assert(model.getDataType == "int" && model.getHasNullLevel)
    val out = model.transform(Seq(Some(3), None, Some(9)).toDF("n")).collect().map(_.getInt(1))
    assert(out.toSeq == Seq(2, 3, 4))
    assert(model.transform(values).schema("i").dataType == IntegerType)
  }

  test("Spark's IndexToString reads the levels") {
    val indexed =
      new ValueIndexer().setInputCol("s").setOutputCol("i").fit(values).transform(values)
    val back = new IndexToString()
      .setInputCol("i")
      .setOutputCol("back")
      .transform(
        indexed.where("s is not null")
      )
    assert(back.collect().forall(r => r.getAs[String]("s") == r.getAs[String]("back")))
  }

  test("a nested input column fails in transformSchema") {
    import SparkTestSession.spark.implicits._
    val frame = Seq(Seq(1)).toDF("arr")
    val error = intercept[IllegalArgumentException](
      new ValueIndexer().setInputCol("arr").setOutputCol("i").transformSchema(frame.schema)
    )
    assert(error.getMessage.contains("'arr' must be a string, boolean or numeric type"))
  }
}

class IndexToValueSuite extends TransformerSuite[IndexToValue] {
  import Fixtures._

  private def indexed: DataFrame =
    new ValueIndexer().setInputCol("n").setOutputCol("i").fit(values).transform(values)

  override def testObjects: Seq[TestObject[IndexToValue]] = Seq(
    TestObject(
      new IndexToValue().setInputCol("i").setOutputCol("back"),
      indexed,
      out => {
        assert(out.schema("back").dataType == IntegerType)
        assert(byId(out, "back") == byId(out, "n"))
      }
    )
  )

  test("an index column without levels fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      new IndexToValue().setInputCol("id").setOutputCol("v").transformSchema(values.schema)
    )
    assert(error.getMessage.contains("column 'id' carries no levels in its metadata"))
  }
}

class SummarizeDataSuite extends TransformerSuite[SummarizeData] {
  import SparkTestSession.spark.implicits._

  private def frame: DataFrame = Seq[(Option[Double], Option[String])](
    (Some(1.0), Some("a")),
    (Some(2.0), Some("b")),
    (Some(3.0), Some("a")),
    (Some(4.0), None),
    (None, Some("c"))
  ).toDF("x", "s")

  // Hand-worked for x = 1, 2, 3, 4 (one null): sample variance 5/3, skewness 0, excess kurtosis
  // 2.5625 / 1.25^2 - 3 = -1.36; exact quantiles are values of x (the smallest with at least that
  // share of values at or below it).
  override def testObjects: Seq[TestObject[SummarizeData]] = Seq(
    TestObject(
      new SummarizeData(),
      frame,
      out => {
        assert(
          out.columns.toSeq
            .take(4) == Seq("Feature", "Count", "Unique_Value_Count", "Missing_Value_Count")
        )
        val rows = out.collect().map(r => r.getString(0) -> r).toMap
        val x = rows("x")
        Seq(
          "Count" -> 4.0,
          "Unique_Value_Count" -> 4.0,
          "Missing_Value_Count" -> 1.0,
          "Min" -> 1.0,
          "1st_Quartile" -> 1.0,
          "Median" -> 2.0,
          "3rd_Quartile" -> 3.0,
          "Max" -> 4.0,
          "Sample_Variance" -> 5.0 / 3,
          "Sample_Skewness" -> 0.0,
          "Sample_Kurtosis" -> -1.36,
          "P0_5" -> 1.0,
          "P95" -> 4.0,
          "P99_5" -> 4.0
        ).foreach { case (name, expected) =>
          assert(math.abs(x.getAs[Double](name) - expected) < 1e-9, name)
        }
        val s = rows("s")
        assert(s.getAs[Double]("Count") == 4.0 && s.getAs[Double]("Unique_Value_Count") == 3.0)
        assert(s.getAs[Double]("Median").isNaN && s.getAs[Double]("Sample_Variance").isNaN)
      },
      Streaming.Refused("streaming input is not supported")
    ),
    TestObject(
      new SummarizeData().setBasic(false).setSample(false).setPercentiles(false),
      frame,
      out =>
        assert(
          out.columns.toSeq == Seq("Feature", "Count", "Unique_Value_Count", "Missing_Value_Count")
        ),
      Streaming.Refused("streaming input is not supported")
    )
  )
}
