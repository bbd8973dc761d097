package mmlspark.onnx

import mmlspark.contracts.RowMessage

/** The messages of an ONNX stage whose model cannot run on a schema (no model, a file ONNX Runtime
  * cannot load; an ONNXModel's feeds, fetches and derived columns), checked before any job, written
  * once: codegen writes them for the Python engine too (see [[mmlspark.contracts.RowMessage]]).
  */
object PlanMessages {
  val NoModel: RowMessage = RowMessage("noModel", "no model; set modelLocation or a model payload")
  val NotLoadable: RowMessage =
    RowMessage("notLoadable", "{what} is not a model ONNX Runtime {version} can load: {error}")
  val UnknownInput: RowMessage = RowMessage(
    "unknownInput",
    "feedDict names model input '{input}', but the model's inputs are {inputs}"
  )
  val NoInputCol: RowMessage =
    RowMessage("noInputCol", "set inputCol (a model with one input) or feedDict")
  val ManyInputs: RowMessage = RowMessage(
    "manyInputs",
    "the model has {count} inputs ({inputs}); map each to a column with feedDict"
  )
  val Unfed: RowMessage =
    RowMessage("unfed", "model inputs {inputs} are not fed; add them to feedDict")
  val NotFeedable: RowMessage =
    RowMessage("notFeedable", "model input {input} is not a tensor ONNXModel can feed")
  val FeedType: RowMessage = RowMessage("feedType", "{expected} (for model input {input})")
  val FeedStrings: RowMessage =
    RowMessage("feedStrings", "a string column or (nested) array of strings")
  val FeedBooleans: RowMessage =
    RowMessage("feedBooleans", "a boolean or numeric column, or a (nested) array of them")
  val FeedNumbers: RowMessage = RowMessage(
    "feedNumbers",
    "a numeric column, a (nested) array of numbers, an ML vector or binary (bytes as uint8)"
  )
  val TransposedColumn: RowMessage = RowMessage(
    "transposedColumn",
    "column '{column}' holds tensors of shape {shape} (its tensorShape metadata) but model input " +
      "{input} takes {template} per row: the same values in another layout (channels first " +
      "against channels last?). Feeding them would reorder nothing and give wrong outputs; give " +
      "the model the layout it takes (transpose the tensor, or use a model exported for it)"
  )
  val NotCut: RowMessage = RowMessage(
    "notCut",
    "fetchDict names {names}, which are not outputs of the model ({outputs}): {error}"
  )
  val UnknownOutput: RowMessage = RowMessage(
    "unknownOutput",
    "fetchDict names model output '{output}', but the model's outputs are {outputs}"
  )
  val NoOutputCol: RowMessage =
    RowMessage("noOutputCol", "set outputCol (a model with one output) or fetchDict")
  val ManyOutputs: RowMessage = RowMessage(
    "manyOutputs",
    "the model has {count} outputs ({outputs}); choose with fetchDict"
  )
  val NotFetchable: RowMessage = RowMessage(
    "notFetchable",
    "model output {output} is not a tensor or a sequence of maps; ONNXModel fetches those only"
  )
  val NotFetched: RowMessage = RowMessage(
    "notFetched",
    "{param} reads column '{column}', which is not fetched; fetched: {fetched}"
  )
  val NotFloating: RowMessage = RowMessage(
    "notFloating",
    "{param} needs an array of floating-point values in '{column}', but it holds {output}"
  )

  val all: Seq[RowMessage] = Seq(
    NoModel,
    NotLoadable,
    UnknownInput,
    NoInputCol,
    ManyInputs,
    Unfed,
    NotFeedable,
    FeedType,
    FeedStrings,
    FeedBooleans,
    FeedNumbers,
    TransposedColumn,
    NotCut,
    UnknownOutput,
    NoOutputCol,
    ManyOutputs,
    NotFetchable,
    NotFetched,
    NotFloating
  )
}
