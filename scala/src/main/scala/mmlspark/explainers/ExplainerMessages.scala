package mmlspark.explainers

import mmlspark.contracts.RowMessage

/** The messages of an explainer that cannot run on its params or data (checked before any job),
  * written once: codegen writes them for the Python backend too (see
  * [[mmlspark.contracts.RowMessage]]).
  */
object ExplainerMessages {
  val NoModel: RowMessage =
    RowMessage("explainerNoModel", "param 'model' must be set to the fitted model")
  val NoBackground: RowMessage = RowMessage(
    "noBackground",
    "no backgroundData: set it with setBackgroundData to a small DataFrame of typical rows"
  )
  val EmptyBackground: RowMessage = RowMessage("emptyBackground", "backgroundData has no rows")
  val SameOutputs: RowMessage =
    RowMessage("sameOutputs", "outputCol and metricsCol are both '{column}'")
  val NegativeClasses: RowMessage =
    RowMessage("negativeClasses", "targetClasses must be 0 or more but were {classes}")
  val ClassesType: RowMessage = RowMessage("classesType", "array<int>")
  val TargetType: RowMessage = RowMessage(
    "targetType",
    "a vector, an array of numbers or a number (the model's output explained)"
  )
  val VectorType: RowMessage = RowMessage("explainedVector", "vector")
  val NoInputCols: RowMessage =
    RowMessage("explainNoInputCols", "param 'inputCols' must name the columns to explain")
  val NoInputCol: RowMessage =
    RowMessage("explainNoInputCol", "param 'inputCol' must name the vector column to explain")
  val NoImageCol: RowMessage =
    RowMessage("explainNoImageCol", "param 'inputCol' must name the image column to explain")
  val ImageInput: RowMessage =
    RowMessage("explainedImage", "an image struct or encoded image bytes (binary)")
  val NotAnInput: RowMessage =
    RowMessage("notAnInput", "categorical feature '{column}' is not in inputCols")
  val Streaming: RowMessage = RowMessage(
    "explainStreaming",
    "streaming input is not supported (each row's samples are grouped back by row; explain " +
      "micro-batches with foreachBatch)"
  )
  val NoTextCol: RowMessage =
    RowMessage("explainNoTextCol", "param 'inputCol' must name the text column to explain")
  val TextType: RowMessage = RowMessage("explainedText", "string")
  val NoFeatures: RowMessage = RowMessage(
    "iceNoFeatures",
    "no features: set categoricalFeatures or numericFeatures to the features to explain"
  )
  val BadFeature: RowMessage = RowMessage(
    "iceBadFeature",
    "feature setting '{setting}' is neither a column name nor a JSON object whose \"name\" " +
      "is one, with only {keys}: {reason}"
  )
  val CategoricalType: RowMessage =
    RowMessage("iceCategoricalType", "a string, boolean or integer (a categorical feature)")
  val NumericType: RowMessage = RowMessage("iceNumericType", "numeric (a numeric feature)")
  val EmptyRange: RowMessage = RowMessage(
    "iceRange",
    "numeric feature '{column}' has rangeMin {min} above rangeMax {max}"
  )

  val all: Seq[RowMessage] = Seq(
    NoModel,
    NoBackground,
    EmptyBackground,
    SameOutputs,
    NegativeClasses,
    ClassesType,
    TargetType,
    VectorType,
    NoInputCols,
    NoInputCol,
    NoImageCol,
    ImageInput,
    NotAnInput,
    Streaming,
    NoTextCol,
    TextType,
    NoFeatures,
    BadFeature,
    CategoricalType,
    NumericType,
    EmptyRange
  )
}
