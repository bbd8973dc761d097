package mmlspark.stages

import mmlspark.contracts.{SparkTestSession, StageChecks, TestObject, TransformerSuite}
import org.apache.spark.sql.{DataFrame, Row}

object BatchFixtures {
  import SparkTestSession.spark.implicits._

  def rows: DataFrame =
    (0 until 23)
      .map(i => (i, s"s$i", Array(i.toDouble, -i.toDouble)))
      .toDF("i", "s", "arr")
      .repartition(2)

  /** Batches of at most `size` whose elements, flattened, are exactly rows 0..22. */
  def checkBatches(size: Int)(out: DataFrame): Unit = {
    val batches = out.collect()
    assert(batches.forall(b => b.getSeq[Int](0).length <= size && b.getSeq[Int](0).nonEmpty))
    batches.foreach(b => assert(b.getSeq[Int](0).length == b.getSeq[String](1).length))
    val flat = batches.flatMap(b => b.getSeq[Int](0).zip(b.getSeq[String](1))).sortBy(_._1)
    assert(flat.toSeq == (0 until 23).map(i => (i, s"s$i")))
  }
}

class MiniBatchTransformerSuite extends TransformerSuite[MiniBatchTransformer] {
  override def testObjects: Seq[TestObject[MiniBatchTransformer]] = Seq(
    TestObject(
      new MiniBatchTransformer().setMiniBatchSize(5),
      BatchFixtures.rows,
      BatchFixtures.checkBatches(5)
    ),
    TestObject(new MiniBatchTransformer(), BatchFixtures.rows, BatchFixtures.checkBatches(64))
  )

  test("one partition of 23 rows in batches of 5 gives sizes 5,5,5,5,3") {
    val out = new MiniBatchTransformer()
      .setMiniBatchSize(5)
      .transform(BatchFixtures.rows.coalesce(1).sortWithinPartitions("i"))
    assert(out.collect().map(_.getSeq[Int](0).length).toSeq == Seq(5, 5, 5, 5, 3))
    assert(out.schema("arr").dataType.catalogString == "array<array<double>>")
  }

  test("a batch size below 1 fails when set") {
    intercept[IllegalArgumentException](new MiniBatchTransformer().setMiniBatchSize(0))
  }
}

class BufferedMiniBatchTransformerSuite extends TransformerSuite[BufferedMiniBatchTransformer] {
  override def testObjects: Seq[TestObject[BufferedMiniBatchTransformer]] = Seq(
    TestObject(
      new BufferedMiniBatchTransformer().setMiniBatchSize(4).setMaxBufferMillis(60000L),
      BatchFixtures.rows,
      BatchFixtures.checkBatches(4)
    )
  )

  test("a batch closes at its time limit when rows arrive slowly") {
    import SparkTestSession.spark.implicits._
    // Each row takes 30 ms to produce; a 45 ms limit closes batches after two rows.
    val slow =
      (0 until 8).toDF("i").coalesce(1).map { r => Thread.sleep(30); r.getInt(0) }.toDF("i")
    val out = new BufferedMiniBatchTransformer()
      .setMiniBatchSize(100)
      .setMaxBufferMillis(45L)
      .transform(slow)
    val sizes = out.collect().map(_.getSeq[Int](0).length)
    assert(sizes.sum == 8)
    assert(sizes.length >= 3, s"expected batches closed by time, got sizes ${sizes.mkString(",")}")
    assert(sizes.forall(_ < 8))
  }
}

class FlattenBatchSuite extends TransformerSuite[FlattenBatch] {
  private def batched: DataFrame =
    new MiniBatchTransformer().setMiniBatchSize(4).transform(BatchFixtures.rows)

  override def testObjects: Seq[TestObject[FlattenBatch]] = Seq(
    TestObject(
      new FlattenBatch(),
      batched,
      out => {
        // Types as before batching (a stream read from files may relax nullability).
        def types(df: DataFrame) = df.schema.map(f => f.name -> f.dataType.catalogString)
        assert(types(out) == types(BatchFixtures.rows))
        StageChecks.assertSameRows(BatchFixtures.rows, out)
      }
    )
  )

  test(
    "arrays of different lengths give the longest's rows, padded with nulls; other columns repeat"
  ) {
    import SparkTestSession.spark.implicits._
    val input = Seq((7, Seq(1, 2, 3), Seq("a"))).toDF("batch", "x", "y")
    val out = new FlattenBatch().transform(input).collect().toSeq
    assert(out == Seq(Row(7, 1, "a"), Row(7, 2, null), Row(7, 3, null)))
  }

  test("input without array columns fails in transformSchema") {
    val error = intercept[IllegalArgumentException](
      new FlattenBatch().transformSchema(Fixtures.people.schema)
    )
    assert(error.getMessage.contains("at least one array column"))
  }
}
