package mmlspark.train

import mmlspark.contracts.RowMessage

/** The messages of the training and evaluation stages that cannot run on their params or data
  * (checked before or while fitting), written once: codegen writes them for the Python backend too
  * (see [[mmlspark.contracts.RowMessage]]). A list of names is quoted ('a', 'b').
  */
object TrainMessages {
  val NoLearner: RowMessage =
    RowMessage("noLearner", "param 'model' must be set to a Spark ML {kind}")
  val WrongLearner: RowMessage =
    RowMessage("wrongLearner", "param 'model' must be a Spark ML {kind} but is {held}")
  val NoLearnerParam: RowMessage = RowMessage(
    "noLearnerParam",
    "the learner {learner} has no param '{name}'; it must be a Spark ML Predictor"
  )
  val NumericLabel: RowMessage = RowMessage("numericLabel", "a numeric label")
  val ClassLabel: RowMessage = RowMessage("classLabel", "a string, boolean or numeric label")
  val LabelNotIndex: RowMessage = RowMessage(
    "labelNotIndex",
    "reindexLabel is false, so the label '{column}' must be a numeric class index but is {actual}"
  )
  val LabelsWithoutReindex: RowMessage = RowMessage(
    "labelsWithoutReindex",
    "labels orders the classes only when reindexLabel is true"
  )
  val NoLabel: RowMessage = RowMessage("noLabel", "no row has a label in '{column}'")
  val LabelsNotIndices: RowMessage = RowMessage(
    "labelsNotIndices",
    "reindexLabel is false, so the label '{column}' must hold class indices 0, 1, ... but holds " +
      "{values}"
  )
  val UnknownLabels: RowMessage = RowMessage(
    "unknownLabels",
    "the training labels {unknown} are not in labels [{given}]"
  )
  val NoFeatures: RowMessage = RowMessage("noFeatures", "no input columns to featurize")
  val NotStringColumn: RowMessage = RowMessage(
    "notStringColumn",
    "'{column}' is named in textCols or categoricalCols but is not a string input column (the " +
      "string input columns are {strings})"
  )
  val TextAndCategorical: RowMessage =
    RowMessage("textAndCategorical", "{columns} named in both textCols and categoricalCols")
  val UnsizedVector: RowMessage =
    RowMessage("unsizedVector", "vector column '{column}' has no non-null value to size it by")
  val ArrayLength: RowMessage = RowMessage(
    "arrayLength",
    "array column '{column}' must hold 1 to {max} values per row (its first holds {size}); use a " +
      "vector column for longer ones"
  )
  val ManyPredictions: RowMessage = RowMessage(
    "manyPredictions",
    "the columns {columns} all carry a trained model's prediction metadata; set predictionCol " +
      "(SynapseML: scoredLabelsCol) to choose one"
  )
  val NoScoreColumn: RowMessage = RowMessage(
    "noScoreColumn",
    "{param} is not set, its default input column '{column}' does not exist (available columns: " +
      "[{available}]) and the input carries no score metadata of a TrainClassifier or " +
      "TrainRegressor model to find it by; set labelCol, predictionCol and probabilityCol " +
      "(SynapseML's labelCol, scoredLabelsCol and scoredProbabilitiesCol/scoresCol)"
  )
  val NoScoredRows: RowMessage =
    RowMessage("noScoredRows", "no rows with both a label and a prediction")
  val NoModels: RowMessage =
    RowMessage("noModels", "param 'models' must be set to the fitted models to compare")
  val UndefinedMetric: RowMessage = RowMessage(
    "undefinedMetric",
    "metric '{metric}' is not defined for {model} (AUC needs two classes and class scores)"
  )

  /** Names as the messages list them: 'a', 'b'. */
  def quoted(names: Seq[String]): String = names.mkString("'", "', '", "'")

  val all: Seq[RowMessage] = Seq(
    NoLearner,
    WrongLearner,
    NoLearnerParam,
    NumericLabel,
    ClassLabel,
    LabelNotIndex,
    LabelsWithoutReindex,
    NoLabel,
    LabelsNotIndices,
    UnknownLabels,
    NoFeatures,
    NotStringColumn,
    TextAndCategorical,
    UnsizedVector,
    ArrayLength,
    ManyPredictions,
    NoScoreColumn,
    NoScoredRows,
    NoModels,
    UndefinedMetric
  )
}
