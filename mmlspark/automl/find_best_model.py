"""FindBestModel, on the JVM or the Python backend."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.automl._FindBestModel import _FindBestModel
from mmlspark.automl.best_model import BestModel
from mmlspark.core.checks import require
from mmlspark.core.wrapper import on_python_backend
from mmlspark.train import ComputeModelStatistics
from mmlspark.train.scores import CLASSIFICATION_SCHEMA, REGRESSION_SCHEMA
from mmlspark.train.training import jvm_class_name, require_transformer

_log = logging.getLogger("mmlspark")

#: Each metric: the task it belongs to, and whether higher is better.
METRICS = {
    "accuracy": ("classification", True),
    "precision": ("classification", True),
    "recall": ("classification", True),
    "f1": ("classification", True),
    "AUC": ("classification", True),
    "mean_squared_error": ("regression", False),
    "root_mean_squared_error": ("regression", False),
    "r2": ("regression", True),
    "mean_absolute_error": ("regression", False),
}


def statistics(stage: Any) -> ComputeModelStatistics:
    """The statistics stage models are scored with, on the Python backend: the label and
    prediction columns as `stage` sets them, else found from each model's score metadata."""
    stats = on_python_backend(
        ComputeModelStatistics, evaluationMetric=METRICS[stage.getEvaluationMetric()][0]
    )
    if stage.isSet(stage.labelCol):
        stats.setLabelCol(stage.getLabelCol())
    if stage.isSet(stage.predictionCol):
        stats.setPredictionCol(stage.getPredictionCol())
    return stats  # type: ignore[no-any-return]


class FindBestModel(_FindBestModel):
    __doc__ = _FindBestModel.__doc__
    _python_backend = True

    def _candidates(self) -> list[Any]:
        require(
            self,
            self.isDefined(self.models),
            row_message("noModels"),
        )
        return [require_transformer(self, "models", m) for m in self.getModels()]

    def _fit(self, dataset: DataFrame) -> BestModel:
        """On the Python backend: each model scored with ComputeModelStatistics (on the Python
        backend too), the best kept by ``evaluationMetric``, as the JVM stage does."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        candidates = self._candidates()
        metric = self.getEvaluationMetric()
        task, higher_is_better = METRICS[metric]
        stats = statistics(self)
        scored = []
        for model in candidates:
            row = stats.transform(model.transform(dataset)).head()
            assert row is not None  # the statistics are one row
            value = row[metric]
            require(
                self,
                value is not None,
                row_message("undefinedMetric", metric=metric, model=model.uid),
            )
            scored.append((model, row, float(value)))
        choose = max if higher_is_better else min
        best = choose(scored, key=lambda s: s[2])
        _log.info(
            "%s %s: best by %s is %s (%s)",
            type(self).__name__,
            self.uid,
            metric,
            best[0].uid,
            best[2],
        )
        rows = [(model.uid, jvm_class_name(model), value, *row) for model, row, value in scored]
        schema = T.StructType(
            [
                T.StructField("model_uid", T.StringType()),
                T.StructField("model_class", T.StringType()),
                T.StructField(metric + "_rank_value", T.DoubleType()),
                *(CLASSIFICATION_SCHEMA if task == "classification" else REGRESSION_SCHEMA).fields,
            ]
        )
        roc = stats.rocCurve(best[0].transform(dataset)) if task == "classification" else []
        model = on_python_backend(BestModel)
        model._resetUid(self.uid)
        self._copyValues(model)
        model._set(bestModel=best[0])
        model._set_metrics(rows, schema, roc)
        return model  # type: ignore[no-any-return]
