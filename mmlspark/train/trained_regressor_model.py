"""TrainedRegressorModel, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import quoted, require_absent
from mmlspark.train import scores, training
from mmlspark.train._TrainedRegressorModel import _TrainedRegressorModel


def output_schema(
    stage: Any, schema: T.StructType, label: str, features: str | None
) -> T.StructType:
    """The output of a trained regressor: the input, the features when kept, and the
    prediction (double) with its score metadata."""
    for c in ([features] if features else []) + ["prediction"]:
        require_absent(stage, schema, c)
    fields = list(schema.fields)
    if features:
        fields.append(T.StructField(features, VectorUDT()))
    meta = scores.score_metadata("prediction", "regression", label)
    return T.StructType([*fields, T.StructField("prediction", T.DoubleType(), metadata=meta)])


class TrainedRegressorModel(_TrainedRegressorModel):
    __doc__ = _TrainedRegressorModel.__doc__
    _python_backend = True

    def _python_schema(self, schema: T.StructType) -> T.StructType:
        training.check_columns(self, schema, self.getInputCols())
        features = self.getFeaturesCol() if self.isSet(self.featuresCol) else None
        return output_schema(self, schema, self.getLabelCol(), features)

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Featurizes like at training, runs the fitted learner and adds its ``prediction``."""
        schema = self._python_schema(dataset.schema)
        index_col = training.helper_prefix(self) + "prediction"
        scored = training.score(self, dataset)
        dropped = {index_col}
        if not self.isSet(self.featuresCol):
            dropped.add(training.features_column(self))
        columns = [F.col(quoted(c)) for c in scored.columns if c not in dropped]
        prediction = F.col(quoted(index_col)).alias(
            "prediction", metadata=schema["prediction"].metadata
        )
        return scored.select(*columns, prediction)
