package mmlspark.stages

import mmlspark.contracts.{EstimatorSuite, SparkTestSession, TestObject}
import org.apache.spark.sql.DataFrame

class ClassBalancerSuite extends EstimatorSuite[ClassBalancer, ClassBalancerModel] {
  import SparkTestSession.spark.implicits._

  // Classes a: 6 rows, b: 3 rows, c: 1 row, null: 2 rows.
  private val labels: Seq[String] =
    Seq.fill(6)("a") ++ Seq.fill(3)("b") ++ Seq("c") ++ Seq(null, null)

  private def frame: DataFrame = labels.zipWithIndex.toDF("species", "id")

  /** n / (k * count(c)) computed from the Scala list. */
  private def expectedWeight(label: String): Double =
    labels.length.toDouble / (labels.distinct.length * labels.count(_ == label))

  override def testObjects: Seq[TestObject[ClassBalancer]] = Seq(
    TestObject(
      new ClassBalancer().setInputCol("species"),
      frame,
      out => {
        val rows = out.collect()
        assert(rows.length == labels.length)
        rows.foreach(r =>
          assert(
            math.abs(r.getAs[Double]("weight") - expectedWeight(r.getAs[String]("species"))) < 1e-12
          )
        )
        // Every class carries the same total weight.
        val totals = rows
          .groupBy(r => Option(r.getAs[String]("species")))
          .values
          .map(_.map(_.getAs[Double]("weight")).sum)
        assert(totals.forall(t => math.abs(t - totals.head) < 1e-9))
      }
    ),
    TestObject(
      new ClassBalancer().setInputCol("id").setOutputCol("w").setBroadcastJoin(false),
      frame,
      out => assert(out.collect().forall(r => math.abs(r.getAs[Double]("w") - 1.0) < 1e-12))
    )
  )

  test("an unseen class gets a null weight and its row is kept") {
    val model = new ClassBalancer().setInputCol("species").fit(frame)
    val out = model.transform(Seq("a", "zebra").toDF("species")).collect()
    assert(out.length == 2)
    assert(out.find(_.getString(0) == "zebra").get.isNullAt(1))
  }

  test("fitting on an empty dataset fails with a clear message") {
    val error = intercept[IllegalArgumentException](
      new ClassBalancer().setInputCol("species").fit(frame.limit(0))
    )
    assert(error.getMessage.contains("empty dataset"))
  }

  test("an existing output column fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      new ClassBalancer().setInputCol("species").setOutputCol("id").transformSchema(frame.schema)
    )
    assert(error.getMessage.contains("'id' already exists"))
  }
}
