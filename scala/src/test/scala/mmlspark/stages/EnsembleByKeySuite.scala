package mmlspark.stages

import mmlspark.contracts.{SparkTestSession, Streaming, TestObject, TransformerSuite}
import org.apache.spark.ml.linalg.{Vector, Vectors}
import org.apache.spark.sql.DataFrame

object EnsembleFixtures {
  import SparkTestSession.spark.implicits._

  val data: Seq[(String, Int, Double, Vector)] = (0 until 12).map { i =>
    (
      if (i == 11) null else s"burst${i % 3}",
      i % 2,
      i * 1.5,
      Vectors.dense(i.toDouble, 1.0 / (i + 1))
    )
  }

  def frame: DataFrame = data.toDF("burst", "camera", "p", "v")

  /** Reference means computed with plain Scala collections, grouped by (burst, camera). */
  def expected: Map[(String, Int), (Double, Seq[Double])] =
    data.groupBy(r => (r._1, r._2)).map { case (k, rows) =>
      val n = rows.length.toDouble
      k -> (rows.map(_._3).sum / n, Seq(0, 1).map(j => rows.map(_._4(j)).sum / n))
    }

  def close(a: Double, b: Double): Boolean = math.abs(a - b) <= 1e-12 * math.max(1.0, math.abs(b))
}

class EnsembleByKeySuite extends TransformerSuite[EnsembleByKey] {
  import EnsembleFixtures._

  private def checkCollapsed(out: DataFrame): Unit = {
    assert(out.columns.toSeq == Seq("burst", "camera", "mean(p)", "mean(v)"))
    val rows = out.collect()
    assert(rows.length == expected.size)
    rows.foreach { r =>
      val (p, v) = expected((r.getString(0), r.getInt(1)))
      assert(close(r.getDouble(2), p))
      assert(r.getAs[Vector](3).toArray.zip(v).forall { case (a, b) => close(a, b) })
    }
  }

  override def testObjects: Seq[TestObject[EnsembleByKey]] = Seq(
    TestObject(
      new EnsembleByKey().setKeys(Array("burst", "camera")).setCols(Array("p", "v")),
      frame,
      checkCollapsed,
      Streaming.Complete
    ),
    TestObject(
      new EnsembleByKey()
        .setKeys(Array("burst", "camera"))
        .setCols(Array("p"))
        .setColNames(Array("avgP"))
        .setCollapseGroup(false),
      frame,
      out => {
        assert(out.columns.toSeq == Seq("burst", "camera", "p", "v", "avgP"))
        val rows = out.collect()
        assert(rows.length == data.length)
        rows.foreach(r => assert(close(r.getDouble(4), expected((r.getString(0), r.getInt(1)))._1)))
      },
      Streaming.Refused("not supported")
    )
  )

  test("a string column to average fails in transformSchema naming expected and actual types") {
    val stage = new EnsembleByKey().setKeys(Array("camera")).setCols(Array("burst"))
    val error = intercept[IllegalArgumentException](stage.transformSchema(frame.schema))
    assert(error.getMessage.contains("'burst' must be numeric or vector but was string"))
  }

  test("colNames must match cols in number") {
    val stage =
      new EnsembleByKey().setKeys(Array("camera")).setCols(Array("p", "v")).setColNames(Array("x"))
    intercept[IllegalArgumentException](stage.transformSchema(frame.schema))
  }

  test("an unknown strategy fails when set") {
    intercept[IllegalArgumentException](new EnsembleByKey().setStrategy("median"))
  }
}
