"""ComputeModelStatistics, on the JVM or the Python backend, taking SynapseML's names for its
score columns too."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from mmlspark.core.aliases import synapseml_names
from mmlspark.train import scores
from mmlspark.train._ComputeModelStatistics import _ComputeModelStatistics

# SynapseML's names for the score columns the statistics stages read.
SCORE_COLUMNS = {
    "scoredLabelsCol": "predictionCol",
    "scoredProbabilitiesCol": "probabilityCol",
    "scoresCol": "probabilityCol",
}


@synapseml_names(SCORE_COLUMNS)
class ComputeModelStatistics(_ComputeModelStatistics):
    __doc__ = _ComputeModelStatistics.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """One row of metrics, computed as on the JVM (see mmlspark.train.scores)."""
        if scores.is_classification(self, dataset.schema):
            row: Any = scores.classification_metrics(self, dataset)
            schema = scores.CLASSIFICATION_SCHEMA
        else:
            row = scores.regression_metrics(self, dataset)
            schema = scores.REGRESSION_SCHEMA
        return dataset.sparkSession.createDataFrame([row], schema)

    def rocCurve(self, dataset: DataFrame) -> list[tuple[float, float]]:
        """The ROC curve (false positive rate, true positive rate) points of a two-class scored
        DataFrame, from (0, 0) to (1, 1); empty for other tasks or without class scores. On the
        Python backend."""
        return scores.roc_curve(self, dataset)
