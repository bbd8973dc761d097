package mmlspark.stages

import scala.collection.mutable.ArrayBuffer

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row}
import org.apache.spark.sql.types.StructType

/** Batches whatever rows are ready, as SynapseML's stage of this name does: a thread of the task
  * reads the partition's rows ahead (up to `maxBatchSize` rows, at most 65536), and each batch is
  * the next row (waiting for it) and every row read by then, up to `maxBatchSize`. A fast source
  * gives full batches; a slow one (a stream, a remote call before this stage) gives small ones
  * without waiting. One output row per batch, every column turned into an array; [[FlattenBatch]]
  * is its exact inverse.
  */
final class DynamicMiniBatchTransformer(override val uid: String)
    extends Transformer
    with DynamicMiniBatchTransformerDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("DynamicMiniBatchTransformer"))

  setDefault(maxBatchSize -> Int.MaxValue)

  override def transformSchema(schema: StructType): StructType = MiniBatching.batchSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    val most = $(maxBatchSize)
    MiniBatching.batches(dataset) { input =>
      val rows = new ReadAhead(input, math.min(most, DynamicMiniBatchTransformer.MaxReadAhead))
      new Iterator[Seq[Row]] {
        override def hasNext: Boolean = rows.hasNext

        override def next(): Seq[Row] = {
          val batch = ArrayBuffer(rows.next())
          var open = true
          while (open && batch.length < most) rows.ready() match {
            case Some(row) => batch += row
            case None => open = false
          }
          batch.toSeq
        }
      }
    }
  }

  override def copy(extra: ParamMap): DynamicMiniBatchTransformer = defaultCopy(extra)
}

object DynamicMiniBatchTransformer extends StageReadable[DynamicMiniBatchTransformer] {

  /** The most rows read ahead of the batches. */
  val MaxReadAhead: Int = 65536
}
