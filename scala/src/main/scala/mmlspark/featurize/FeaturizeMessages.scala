package mmlspark.featurize

import mmlspark.contracts.RowMessage

/** The messages of the featurization stages that cannot run on their params or data, written once:
  * codegen writes them for the Python backend too (see [[mmlspark.contracts.RowMessage]]).
  */
object FeaturizeMessages {
  val NoInputCols: RowMessage = RowMessage("noInputCols", "param 'inputCols' must be set")
  val ColumnCount: RowMessage = RowMessage(
    "columnCount",
    "outputCols must name one column per input column: {inputs} inputCols but {outputs} outputCols"
  )
  val NoCustomValue: RowMessage =
    RowMessage("noCustomValue", "cleaningMode is Custom but customValue is not set")
  val NoStatistic: RowMessage = RowMessage(
    "noStatistic",
    "column '{column}' has no non-missing value to take the {mode} of"
  )
  val FillCount: RowMessage =
    RowMessage("fillCount", "fillValues holds {fills} values for {inputs} inputCols")
  val NoLevels: RowMessage = RowMessage(
    "noLevels",
    "column '{column}' carries no levels in its metadata (a nominal attribute with values, as " +
      "ValueIndexer and StringIndexer write)"
  )
  val ParamNotSet: RowMessage = RowMessage("paramNotSet", "param '{param}' must be set")
  val NoConversion: RowMessage = RowMessage(
    "noConversion",
    "convertTo '{target}' takes {expected}, but column '{column}' is {actual}"
  )
  val LabelsStreaming: RowMessage = RowMessage(
    "labelsStreaming",
    "dealing each label to every partition needs every row: streaming input is not supported"
  )
  val StreamingInput: RowMessage = RowMessage(
    "summaryStreaming",
    "the statistics need every row: streaming input is not supported"
  )

  val all: Seq[RowMessage] = Seq(
    NoInputCols,
    ColumnCount,
    NoCustomValue,
    NoStatistic,
    FillCount,
    NoLevels,
    ParamNotSet,
    NoConversion,
    LabelsStreaming,
    StreamingInput
  )
}
