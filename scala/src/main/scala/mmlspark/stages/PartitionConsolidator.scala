package mmlspark.stages

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Encoders, Row}
import org.apache.spark.sql.types.StructType

import java.util.UUID

/** Funnels the rows of the tasks that run at the same time on an executor into one of them: the
  * first task of the stage to start there emits its own rows and those the others hand it, the
  * others emit none. What reads the output (a connection to a service, a writer) then sees one
  * stream of rows per executor instead of one per task. Rows are kept exactly, in another
  * partitioning: at most one non-empty partition per executor at a time. At most a thousand rows
  * wait in the hand-over, so memory stays bounded. A task that fails while emitting the rows of
  * others loses them (their tasks have finished), as any consolidation across tasks can: use it
  * where rows go out to a service, not where a retried job must give every row again.
  */
final class PartitionConsolidator(override val uid: String)
    extends Transformer
    with PartitionConsolidatorDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("PartitionConsolidator"))

  setDefault(gracePeriodMillis -> 1000L)

  override def transformSchema(schema: StructType): StructType = schema

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val df = dataset.toDF()
    // A key per transform: two queries of the same stage never share a funnel.
    val key = UUID.randomUUID().toString
    val grace = $(gracePeriodMillis)
    df.mapPartitions((rows: Iterator[Row]) => Consolidation.consolidate(key, rows, grace))(
      Encoders.row(df.schema)
    )
  }

  override def copy(extra: ParamMap): PartitionConsolidator = defaultCopy(extra)
}

object PartitionConsolidator extends StageReadable[PartitionConsolidator]
