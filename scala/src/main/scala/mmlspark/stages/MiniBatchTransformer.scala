package mmlspark.stages

import mmlspark.contracts.{HasMiniBatchSize, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Groups each partition's rows into batches of `miniBatchSize` rows (the last batch of a partition
  * may be smaller): one output row per batch, every column turned into an array of the batch's
  * values in row order. [[FlattenBatch]] is its exact inverse.
  */
final class MiniBatchTransformer(override val uid: String)
    extends Transformer
    with HasMiniBatchSize
    with StageWritable {

  def this() = this(Identifiable.randomUID("MiniBatchTransformer"))

  setDefault(miniBatchSize -> 64)

  override def transformSchema(schema: StructType): StructType = MiniBatching.batchSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    val size = $(miniBatchSize)
    MiniBatching.batch(dataset, (count, _) => count >= size)
  }

  override def copy(extra: ParamMap): MiniBatchTransformer = defaultCopy(extra)
}

object MiniBatchTransformer extends StageReadable[MiniBatchTransformer]
