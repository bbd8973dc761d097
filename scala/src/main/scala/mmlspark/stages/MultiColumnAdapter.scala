package mmlspark.stages

import mmlspark.contracts.{HasInputCols, HasOutputCols, SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.{Estimator, Pipeline, PipelineModel, PipelineStage, Transformer}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.Dataset
import org.apache.spark.sql.types.StructType

/** Applies a single-column stage (`baseStage`, with the params inputCol and outputCol) to each pair
  * of `inputCols` and `outputCols`: fitting fits one copy of it per pair, in order, and gives the
  * Pipeline's model of those copies (fitted where the base stage is an Estimator). The base stage
  * itself is never changed.
  */
final class MultiColumnAdapter(override val uid: String)
    extends Estimator[PipelineModel]
    with HasInputCols
    with HasOutputCols
    with MultiColumnAdapterDecls {

  def this() = this(Identifiable.randomUID("MultiColumnAdapter"))

  /** The copies of the base stage, one per column pair, in the order of `inputCols`. */
  def pairStages: Array[PipelineStage] = {
    SchemaUtils.require(this, isDefined(baseStage), StagesMessages.NoBaseStage())
    SchemaUtils.require(
      this,
      isDefined(inputCols) && isDefined(outputCols),
      StagesMessages.AdapterCols()
    )
    val (ins, outs) = ($(inputCols), $(outputCols))
    SchemaUtils.require(
      this,
      ins.length == outs.length,
      StagesMessages.AdapterCount("inputs" -> ins.length, "outputs" -> outs.length)
    )
    SchemaUtils.requireDistinct(this, "outputCols", outs.toSeq)
    val base = $(baseStage)
    SchemaUtils.require(
      this,
      base.isInstanceOf[Transformer] || base.isInstanceOf[Estimator[_]],
      StagesMessages.NotAStage("stage" -> base.getClass.getSimpleName)
    )
    val single = base.hasParam("inputCol") && base.hasParam("outputCol")
    SchemaUtils.require(
      this,
      single || (base.hasParam("inputCols") && base.hasParam("outputCols")),
      StagesMessages.NotSingleColumn("stage" -> base.getClass.getSimpleName)
    )
    ins.zip(outs).map { case (in, out) =>
      val extra =
        if (single) ParamMap(base.getParam("inputCol").w(in), base.getParam("outputCol").w(out))
        else
          ParamMap(
            base.getParam("inputCols").w(Array(in)),
            base.getParam("outputCols").w(Array(out))
          )
      base.copy(extra)
    }
  }

  override def transformSchema(schema: StructType): StructType = {
    val stages = pairStages
    $(inputCols).foreach(c => SchemaUtils.requireColumn(this, schema, c))
    $(outputCols).foreach(c => SchemaUtils.requireAbsent(this, schema, c))
    stages.foldLeft(schema)((s, stage) => stage.transformSchema(s))
  }

  override def fit(dataset: Dataset[_]): PipelineModel = {
    transformSchema(dataset.schema, logging = true)
    new Pipeline(uid).setStages(pairStages).fit(dataset)
  }

  override def copy(extra: ParamMap): MultiColumnAdapter =
    StageParams.copyStages(this, defaultCopy[MultiColumnAdapter](extra), extra)
}

object MultiColumnAdapter extends StageReadable[MultiColumnAdapter]
