package mmlspark.stages

import java.util.concurrent.TimeUnit

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Batches rows like [[MiniBatchTransformer]], but a batch also closes once `maxBufferMillis` have
  * passed since its first row, so a slow source (a stream, a remote read) does not hold rows back
  * waiting for a full batch. The clock is checked as each row arrives: a batch closes at
  * `miniBatchSize` rows or at the first row after the deadline, whichever comes first.
  * [[FlattenBatch]] is its exact inverse.
  */
final class BufferedMiniBatchTransformer(override val uid: String)
    extends Transformer
    with BufferedMiniBatchTransformerDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("BufferedMiniBatchTransformer"))

  setDefault(miniBatchSize -> 64, maxBufferMillis -> 1000L)

  override def transformSchema(schema: StructType): StructType = MiniBatching.batchSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    val size = $(miniBatchSize)
    val maxNanos = TimeUnit.MILLISECONDS.toNanos($(maxBufferMillis))
    MiniBatching.batch(
      dataset,
      (count, start) => count >= size || System.nanoTime() - start >= maxNanos
    )
  }

  override def copy(extra: ParamMap): BufferedMiniBatchTransformer = defaultCopy(extra)
}

object BufferedMiniBatchTransformer extends StageReadable[BufferedMiniBatchTransformer]
