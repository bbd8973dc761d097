package mmlspark.stages

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Groups each partition's rows into batches of exactly `batchSize` rows (the last batch of a
  * partition may be smaller), one output row per batch with every column turned into an array, as
  * SynapseML's stage of this name does. With `buffered`, a thread of the task reads up to
  * `maxBufferSize` batches ahead, so the stages before this one keep working while the stages after
  * it handle a batch. [[FlattenBatch]] is its exact inverse; [[MiniBatchTransformer]] is the same
  * without read-ahead.
  */
final class FixedMiniBatchTransformer(override val uid: String)
    extends Transformer
    with FixedMiniBatchTransformerDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("FixedMiniBatchTransformer"))

  setDefault(buffered -> false, maxBufferSize -> Int.MaxValue)

  override def transformSchema(schema: StructType): StructType = {
    require(isDefined(batchSize), s"$uid: param 'batchSize' must be set")
    MiniBatching.batchSchema(schema)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    val size = $(batchSize)
    val ahead =
      if ($(buffered)) math.min(size.toLong * $(maxBufferSize), Int.MaxValue.toLong).toInt else 0
    MiniBatching.batch(dataset, (count, _) => count >= size, ahead)
  }

  override def copy(extra: ParamMap): FixedMiniBatchTransformer = defaultCopy(extra)
}

object FixedMiniBatchTransformer extends StageReadable[FixedMiniBatchTransformer]
