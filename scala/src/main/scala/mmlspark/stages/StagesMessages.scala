package mmlspark.stages

import mmlspark.contracts.RowMessage

/** The messages of the utility stages that cannot run on their params or data, written once:
  * codegen writes them for the Python backend too (see [[mmlspark.contracts.RowMessage]]).
  */
object StagesMessages {
  val RenameParams: RowMessage =
    RowMessage("renameParams", "params 'inputCol' and 'outputCol' must be set")
  val NoBaseStage: RowMessage = RowMessage("noBaseStage", "param 'baseStage' must be set")
  val AdapterCols: RowMessage =
    RowMessage("adapterCols", "params 'inputCols' and 'outputCols' must be set")
  val AdapterCount: RowMessage = RowMessage(
    "adapterCount",
    "outputCols must name one column per input column: {inputs} inputCols but {outputs} outputCols"
  )
  val NotSingleColumn: RowMessage = RowMessage(
    "notSingleColumn",
    "baseStage {stage} must have the params inputCol and outputCol (or inputCols and outputCols, " +
      "given one column each)"
  )
  val NotAStage: RowMessage = RowMessage(
    "notAStage",
    "param 'baseStage' must be a Transformer or an Estimator but was {stage}"
  )

  val all: Seq[RowMessage] =
    Seq(RenameParams, NoBaseStage, AdapterCols, AdapterCount, NotSingleColumn, NotAStage)
}
