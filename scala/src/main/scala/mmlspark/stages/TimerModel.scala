package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.ml.{Model, Transformer}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Runs the transformer in `stage`, timing each transform; made by fitting a [[Timer]].
  *
  * @param uid
  *   the uid of the Timer it was fitted from
  */
final class TimerModel(override val uid: String)
    extends Model[TimerModel]
    with TimerModelDecls
    with Logging {

  def this() = this(Identifiable.randomUID("TimerModel"))

  setDefault(fitMillis -> -1L)

  @volatile private var lastMillis: Long = -1L

  /** How long the most recent transform took, in milliseconds (-1 before the first). */
  def lastTransformMillis: Long = lastMillis

  private def transformer: Transformer =
    SchemaUtils.requireTransformer(this, "stage", requireStage())

  override def transformSchema(schema: StructType): StructType = transformer.transformSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    val start = System.nanoTime()
    val out = transformer.transform(dataset)
    val result =
      if ($(materialize) && !out.isStreaming) {
        val cached = out.cache()
        cached.count()
        cached
      } else out
    lastMillis = (System.nanoTime() - start) / 1000000L
    logInfo(s"${SchemaUtils.stageName(this)}: transform by ${transformer.uid} took $lastMillis ms")
    result
  }

  override def copy(extra: ParamMap): TimerModel =
    StageParams.copyStages(this, copyValues(new TimerModel(uid), extra).setParent(parent), extra)
}

object TimerModel extends StageReadable[TimerModel]
