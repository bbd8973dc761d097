"""ComputePerInstanceStatistics, on the JVM or the Python backend, taking SynapseML's names for
its score columns too."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.aliases import synapseml_names
from mmlspark.core.checks import is_vector, quoted, require_absent, require_column_type
from mmlspark.train import scores
from mmlspark.train._ComputePerInstanceStatistics import _ComputePerInstanceStatistics
from mmlspark.train.compute_model_statistics import SCORE_COLUMNS


@synapseml_names(SCORE_COLUMNS)
class ComputePerInstanceStatistics(_ComputePerInstanceStatistics):
    __doc__ = _ComputePerInstanceStatistics.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each row's loss, as on the JVM: ``log_loss`` (classification) or ``L1_loss`` and
        ``L2_loss`` (regression)."""
        schema = dataset.schema
        label = F.col(quoted(scores.label_column(self, schema)))
        prediction = F.col(quoted(scores.prediction_column(self, schema)))
        if scores.is_classification(self, schema):
            probabilities = scores.probability_column(self, schema)
            require_column_type(
                self,
                schema,
                probabilities,
                "a vector of class probabilities for log-loss",
                is_vector,
            )
            require_absent(self, schema, "log_loss")
            named = scores.classes(schema[scores.prediction_column(self, schema)].metadata)
            if named is not None:
                index = scores.class_index(named, scores.label_column(self, schema))
            else:
                index = label.cast("long")
            loss = scores.log_loss(F.col(quoted(probabilities)), index)
            return dataset.withColumn("log_loss", loss.cast(T.DoubleType()))
        for c in ("L1_loss", "L2_loss"):
            require_absent(self, schema, c)
        error = prediction.cast("double") - label.cast("double")
        return dataset.withColumn("L1_loss", F.abs(error)).withColumn(
            "L2_loss", F.pow(error, F.lit(2))
        )
