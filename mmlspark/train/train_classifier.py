"""TrainClassifier, on the JVM or the Python backend."""

from __future__ import annotations

import math

from pyspark.ml.classification import Classifier
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import catalog_string, quoted, require, require_column_type
from mmlspark.core.wrapper import on_python_backend
from mmlspark.train import scores, training
from mmlspark.train._TrainClassifier import _TrainClassifier
from mmlspark.train.trained_classifier_model import TrainedClassifierModel, output_schema


def _whole(text: str) -> bool:
    """Whether a label written as a string is a class index: a whole number from 0."""
    try:
        value = float(text)
    except ValueError:
        return False
    return value >= 0 and value == math.floor(value)


class TrainClassifier(_TrainClassifier):
    __doc__ = _TrainClassifier.__doc__
    _python_backend = True

    def _python_schema(self, schema: T.StructType) -> T.StructType:
        """The checks of the JVM stage's ``transformSchema``, and the model's output schema."""
        require(self, self.isDefined(self.model), row_message("noLearner", kind="classifier"))
        learner = self.getModel()
        require(
            self,
            isinstance(learner, Classifier),
            row_message("wrongLearner", kind="classifier", held=training.jvm_class_name(learner)),
        )
        label_col = self.getLabelCol()
        label = require_column_type(
            self,
            schema,
            label_col,
            row_message("classLabel"),
            lambda t: isinstance(t, (T.StringType, T.BooleanType, T.NumericType)),
        )
        reindex = self.getReindexLabel()
        require(
            self,
            reindex or isinstance(label.dataType, T.NumericType),
            row_message("labelNotIndex", column=label_col, actual=catalog_string(label.dataType)),
        )
        require(
            self,
            reindex or not self.isDefined(self.labels),
            row_message("labelsWithoutReindex"),
        )
        training.check_columns(self, schema, training.feature_columns(self, schema))
        features = self.getFeaturesCol() if self.isSet(self.featuresCol) else None
        return output_schema(self, schema, label.dataType, learner, label_col, features)

    def _levels(self, seen: list[tuple[object, str]], data_type: T.DataType) -> list[str]:
        """The classes in the learner's index order, from the distinct training labels."""
        label_col = self.getLabelCol()
        if not self.getReindexLabel():
            bad = [text for _, text in seen if not _whole(text)]
            require(
                self,
                not bad,
                row_message("labelsNotIndices", column=label_col, values=", ".join(bad[:5])),
            )
            count = int(max(float(text) for _, text in seen)) + 1
            decimal = isinstance(data_type, (T.DoubleType, T.FloatType, T.DecimalType))
            return [f"{i}.0" if decimal else str(i) for i in range(count)]
        if self.isSet(self.labels):
            given = self.getLabels()
            unknown = [text for _, text in seen if text not in given]
            require(
                self,
                not unknown,
                row_message(
                    "unknownLabels", unknown=training.listed(unknown[:5]), given=", ".join(given)
                ),
            )
            return list(given)
        return [text for _, text in seen]

    def _fit(self, dataset: DataFrame) -> TrainedClassifierModel:
        """On the Python backend: the JVM stage's featurization and label indexing with pyspark's
        own stages, then the learner (a pyspark classifier) fitted on the features."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        training.require_learners_run(self)
        self._python_schema(dataset.schema)
        label_col = self.getLabelCol()
        data_type = dataset.schema[label_col].dataType
        data = training.labelled(self, dataset, label_col)
        label = F.col(quoted(label_col))
        rows = data.select(label, label.cast("string")).distinct().collect()
        rows.sort(key=training.label_sort_key(data_type))
        require(self, bool(rows), row_message("noLabel", column=label_col))
        levels = self._levels([(r[0], r[1]) for r in rows], data_type)
        index = scores.class_index(levels, label_col) if self.getReindexLabel() else label
        trained = on_python_backend(TrainedClassifierModel)
        trained._resetUid(self.uid)
        trained.setLevels(levels)
        return training.fit_into(  # type: ignore[no-any-return]
            self, dataset, data, index, training.label_type(data_type), trained
        )
