package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import mmlspark.featurize.FeaturizeMessages
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.expressions.Window
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types._

/** Redistributes the rows so that every partition holds every label of `labelCol`: each label's
  * rows, in a random order drawn with `seed`, are dealt to the partitions in turn (the input's
  * number of partitions, up to its last one holding rows), after `mode` has set how many rows of
  * each label there are: `original` keeps each row once (a label with fewer rows than partitions
  * reaches only that many), `equal` repeats each label's rows in turn up to the largest label's
  * count and at least one row per partition, `mixed` goes halfway between the two, again with at
  * least one row per partition.
  */
final class StratifiedRepartition(override val uid: String)
    extends Transformer
    with StratifiedRepartitionDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("StratifiedRepartition"))

  setDefault(labelCol -> "label", mode -> "mixed", seed -> 0L)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(labelCol), StratifiedRepartition.Labels)(
      StratifiedRepartition.isLabel
    )
    schema
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    SchemaUtils.require(this, !dataset.isStreaming, FeaturizeMessages.LabelsStreaming())
    val df = dataset.toDF()
    val label = col(SchemaUtils.quoted($(labelCol)))
    // One job: each label's count, and the partitions (up to the last holding rows).
    val stats = df
      .select(label.as("label"), spark_partition_id().as("partition"))
      .groupBy("label")
      .agg(count(lit(1)), max("partition"))
      .collect()
    if (stats.isEmpty) return df
    val partitions = stats.map(_.getInt(2)).max + 1
    val equal = math.max(stats.map(_.getLong(1)).max, partitions.toLong)
    val Seq(order, rank, size, repeat, slot) =
      StratifiedRepartition.unused(df.schema, Seq("order", "rank", "size", "repeat", "slot"))
    val byLabel = Window.partitionBy(label)
    val n = col(size)
    val target: Column = $(mode) match {
      case "original" => n
      case "equal" => lit(equal)
      case _ => greatest(lit(partitions.toLong), ceil((n + lit(equal)) / 2).cast(LongType))
    }
    // The k-th row of a label (k from 0, in the random order) is repeated as slots k, k + n,
    // k + 2n, ... below the label's target; slot s goes to partition s mod partitions.
    val dealt = df
      .withColumn(order, rand($(seed)))
      .withColumn(rank, row_number().over(byLabel.orderBy(col(order))).cast(LongType) - 1)
      .withColumn(size, count(lit(1)).over(byLabel))
      .withColumn(repeat, explode(sequence(lit(0L), ceil(target / n).cast(LongType) - 1)))
      .withColumn(slot, col(repeat) * n + col(rank))
      .where(col(slot) < target)
    dealt
      .repartitionByRange(partitions, pmod(col(slot), lit(partitions.toLong)))
      .drop(order, rank, size, repeat, slot)
  }

  override def copy(extra: ParamMap): StratifiedRepartition = defaultCopy(extra)
}

object StratifiedRepartition extends StageReadable[StratifiedRepartition] {

  val modes: Seq[String] = Seq("equal", "original", "mixed")

  /** What a label column holds, as errors name it. */
  val Labels = "a string, boolean or numeric type"

  def isLabel(t: DataType): Boolean =
    t == StringType || t == BooleanType || t.isInstanceOf[NumericType]

  /** Names not in `schema` for the working columns `names`. */
  def unused(schema: StructType, names: Seq[String]): Seq[String] =
    names.map { name =>
      Iterator.from(0).map(i => s"__${name}_$i").find(n => !schema.fieldNames.contains(n)).get
    }
}
