package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.ml.{Estimator, PipelineStage, Transformer}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.Dataset
import org.apache.spark.sql.types.StructType

/** Params shared by [[Timer]] and [[TimerModel]]. */
private[stages] trait TimerParams extends org.apache.spark.ml.param.Params with TimerParamsDecls {

  setDefault(materialize -> true)

  protected def requireStage(): PipelineStage = {
    SchemaUtils.require(this, isDefined(stage), "param 'stage' must be set")
    $(stage)
  }
}

/** Times the stage it wraps. Fitting fits the inner stage (if it is an Estimator) and records how
  * long that took; the resulting [[TimerModel]] times each transform. Both are logged and readable
  * from the model.
  */
final class Timer(override val uid: String)
    extends Estimator[TimerModel]
    with TimerParams
    with Logging {

  def this() = this(Identifiable.randomUID("Timer"))

  override def transformSchema(schema: StructType): StructType =
    requireStage().transformSchema(schema)

  override def fit(dataset: Dataset[_]): TimerModel = {
    transformSchema(dataset.schema)
    val start = System.nanoTime()
    val fitted: Transformer = $(stage) match {
      case estimator: Estimator[_] => estimator.fit(dataset).asInstanceOf[Transformer]
      case transformer: Transformer => transformer
      case other =>
        throw new IllegalArgumentException(
          s"${SchemaUtils.stageName(this)}: param 'stage' must be a Transformer or an Estimator " +
            s"but was ${other.getClass.getName}"
        )
    }
    val millis = (System.nanoTime() - start) / 1000000L
    logInfo(s"${SchemaUtils.stageName(this)}: fitting ${$(stage).uid} took $millis ms")
    copyValues(new TimerModel(uid))
      .setStage(fitted)
      .setFitMillis(millis)
      .setParent(this)
  }

  override def copy(extra: ParamMap): Timer =
    StageParams.copyStages(this, defaultCopy[Timer](extra), extra)
}

object Timer extends StageReadable[Timer]
