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

object SlowRows {
  import SparkTestSession.spark.implicits._

  /** `n` rows in one partition, each taking `millis` to produce; row i fails when i == `failAt`.
    * Each row records whether the thread producing it saw its task.
    */
  def apply(n: Int, millis: Long, failAt: Int = -1): DataFrame =
    (0 until n)
      .toDF("i")
      .coalesce(1)
      .map { r =>
        Thread.sleep(millis)
        val i = r.getInt(0)
        if (i == failAt) throw new IllegalStateException(s"row $i cannot be produced")
        (i, org.apache.spark.TaskContext.get() != null)
      }
      .toDF("i", "sawTask")
}

class FixedMiniBatchTransformerSuite extends TransformerSuite[FixedMiniBatchTransformer] {
  override def testObjects: Seq[TestObject[FixedMiniBatchTransformer]] = Seq(
    TestObject(
      new FixedMiniBatchTransformer().setBatchSize(5),
      BatchFixtures.rows,
      BatchFixtures.checkBatches(5)
    ),
    TestObject(
      new FixedMiniBatchTransformer().setBatchSize(4).setBuffered(true).setMaxBufferSize(2),
      BatchFixtures.rows,
      BatchFixtures.checkBatches(4)
    )
  )

  test("batches hold exactly batchSize rows in order, read ahead or not") {
    for (buffered <- Seq(false, true)) {
      val out = new FixedMiniBatchTransformer()
        .setBatchSize(5)
        .setBuffered(buffered)
        .transform(BatchFixtures.rows.coalesce(1).sortWithinPartitions("i"))
        .collect()
      assert(out.map(_.getSeq[Int](0).length).toSeq == Seq(5, 5, 5, 5, 3))
      assert(out.flatMap(_.getSeq[Int](0)).toSeq == (0 until 23))
    }
  }

  test("the read-ahead thread runs as the task, and a failure there fails the job") {
    val out = new FixedMiniBatchTransformer()
      .setBatchSize(3)
      .setBuffered(true)
      .transform(SlowRows(7, 1))
      .collect()
    assert(out.flatMap(_.getSeq[Int](0)).toSeq == (0 until 7))
    assert(out.flatMap(_.getSeq[Boolean](1)).forall(identity))
    val error = intercept[Exception](
      new FixedMiniBatchTransformer()
        .setBatchSize(3)
        .setBuffered(true)
        .transform(SlowRows(7, 1, failAt = 4))
        .collect()
    )
    assert(
      Iterator
        .iterate[Throwable](error)(_.getCause)
        .takeWhile(_ != null)
        .exists(
          _.getMessage.contains("row 4 cannot be produced")
        )
    )
  }

  test("batchSize must be set, and at least 1") {
    val error = intercept[IllegalArgumentException](
      new FixedMiniBatchTransformer().transformSchema(BatchFixtures.rows.schema)
    )
    assert(error.getMessage.contains("'batchSize' must be set"))
    intercept[IllegalArgumentException](new FixedMiniBatchTransformer().setBatchSize(0))
  }
}

class DynamicMiniBatchTransformerSuite extends TransformerSuite[DynamicMiniBatchTransformer] {
  // How rows fall into batches depends on timing; batches of one row compare exactly (after
  // save and load too), and the tests below check the batching itself.
  override def testObjects: Seq[TestObject[DynamicMiniBatchTransformer]] = Seq(
    TestObject(
      new DynamicMiniBatchTransformer().setMaxBatchSize(1),
      BatchFixtures.rows,
      BatchFixtures.checkBatches(1)
    )
  )

  test("every row lands in exactly one batch, at most maxBatchSize long") {
    BatchFixtures.checkBatches(4)(
      new DynamicMiniBatchTransformer().setMaxBatchSize(4).transform(BatchFixtures.rows)
    )
    BatchFixtures.checkBatches(23)(new DynamicMiniBatchTransformer().transform(BatchFixtures.rows))
  }

  test("a slow source gives the rows ready, in order, without waiting for a full batch") {
    // A row every 20 ms while the consumer takes 50 ms per batch: batches hold the rows read
    // meanwhile, so there are several, most with more than one row, and none waits for 40 rows.
    val out = new DynamicMiniBatchTransformer()
      .setMaxBatchSize(40)
      .transform(SlowRows(40, 20))
      .map { r => Thread.sleep(50); r.getSeq[Int](0) }(
        org.apache.spark.sql.Encoders.kryo[Seq[Int]]
      )
      .collect()
    assert(out.flatten.toSeq == (0 until 40))
    assert(out.length >= 4, s"batch sizes ${out.map(_.length).mkString(",")}")
    assert(out.exists(_.length > 1), s"batch sizes ${out.map(_.length).mkString(",")}")
  }

  test("batches never exceed maxBatchSize; the reader runs as the task") {
    val out =
      new DynamicMiniBatchTransformer().setMaxBatchSize(3).transform(SlowRows(10, 0)).collect()
    assert(out.forall(_.getSeq[Int](0).length <= 3))
    assert(out.flatMap(_.getSeq[Int](0)).toSeq == (0 until 10))
    assert(out.flatMap(_.getSeq[Boolean](1)).forall(identity))
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
