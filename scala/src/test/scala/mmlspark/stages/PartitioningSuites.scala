package mmlspark.stages

import mmlspark.contracts.{SparkTestSession, Streaming, TestObject, TransformerSuite}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.spark_partition_id

object PartitioningFixtures {
  import SparkTestSession.spark.implicits._

  /** Labels 0 (12 rows), 1 (4) and 2 (2) over 3 partitions. */
  def labelled: DataFrame =
    (Seq.fill(12)(0) ++ Seq.fill(4)(1) ++ Seq.fill(2)(2)).zipWithIndex
      .map { case (l, i) => (i, l) }
      .toDF("id", "label")
      .repartition(3)

  /** Each partition's labels with their counts. */
  def labelsByPartition(out: DataFrame): Map[Int, Map[Int, Int]] =
    out
      .select(spark_partition_id(), out("label"))
      .collect()
      .groupBy(_.getInt(0))
      .map { case (p, rows) => p -> rows.groupBy(_.getInt(1)).map { case (l, r) => l -> r.length } }
}

class StratifiedRepartitionSuite extends TransformerSuite[StratifiedRepartition] {
  import PartitioningFixtures._

  // Hand-worked: equal gives every label 12 rows, 4 per partition.
  override def testObjects: Seq[TestObject[StratifiedRepartition]] = Seq(
    TestObject(
      new StratifiedRepartition().setMode("equal").setSeed(1L),
      labelled,
      out => {
        val parts = labelsByPartition(out)
        assert(parts.size == 3 && parts.values.forall(_ == Map(0 -> 4, 1 -> 4, 2 -> 4)))
      },
      Streaming.Refused("streaming input is not supported")
    )
  )

  test("original keeps every row once, each label dealt in turn") {
    val out = new StratifiedRepartition().setMode("original").transform(labelled)
    assert(out.select("id").collect().map(_.getInt(0)).sorted.toSeq == (0 until 18))
    val parts = labelsByPartition(out)
    assert(parts.values.forall(c => c(0) == 4 && c.get(1).exists(_ >= 1)))
    assert(parts.values.count(_.contains(2)) == 2)
  }
}

class PartitionConsolidatorSuite extends TransformerSuite[PartitionConsolidator] {
  import SparkTestSession.spark.implicits._

  override def testObjects: Seq[TestObject[PartitionConsolidator]] = Seq(
    TestObject(
      new PartitionConsolidator().setGracePeriodMillis(200L),
      (0 until 2500).toDF("n").repartition(4),
      out => assert(out.collect().map(_.getInt(0)).sorted.toSeq == (0 until 2500))
    )
  )

  test("the rows of concurrent tasks come out of one partition") {
    val out = new PartitionConsolidator()
      .setGracePeriodMillis(200L)
      .transform((0 until 2500).toDF("n").repartition(4))
    val partitions = out.select(spark_partition_id()).distinct().count()
    assert(partitions == 1)
  }
}
