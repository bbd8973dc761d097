package mmlspark.onnx

import mmlspark.contracts.RowMessage

/** The messages of rows whose values cannot be fed to a model, written once: codegen writes them
  * for the Python engine too (see [[mmlspark.contracts.RowMessage]]).
  */
object TensorMessages {
  val NullInput: RowMessage = RowMessage("nullInput", "input column '{column}' is null")
  val NullElement: RowMessage = RowMessage("nullElement", "array element {index} is null")
  val NullNested: RowMessage = RowMessage("nullNested", "nested element {index} is null")
  val Ragged: RowMessage = RowMessage(
    "ragged",
    "ragged nested array: element 0 has shape {first}, element {index} {shape}"
  )
  val WrongCount: RowMessage = RowMessage(
    "wrongCount",
    "input column '{column}' holds {count} values (shape {shape}) but model input {input} needs " +
      "{template} per row"
  )
  val Transposed: RowMessage = RowMessage(
    "transposed",
    "input column '{column}' holds shape {shape} but model input {input} takes {template}: the " +
      "same dimensions in another order (channels first against channels last?); transpose the " +
      "tensor to the model's layout"
  )

  val all: Seq[RowMessage] = Seq(NullInput, NullElement, NullNested, Ragged, WrongCount, Transposed)
}
