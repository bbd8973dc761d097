"""BestModel with the metrics of every candidate and the ROC curve as DataFrames, on the JVM or
the Python backend."""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from mmlspark.automl._BestModel import _BestModel
from mmlspark.core.wrapper import require_java_obj

ROC_SCHEMA = T.StructType(
    [
        T.StructField("false_positive_rate", T.DoubleType()),
        T.StructField("true_positive_rate", T.DoubleType()),
    ]
)


class BestModel(_BestModel):
    """The model :class:`FindBestModel` chose; transforms like it.

    Examples
    --------
    >>> finder = FindBestModel(models=[m1, m2], evaluationMetric="AUC")  # doctest: +SKIP
    >>> best = finder.fit(validation)  # doctest: +SKIP
    >>> best.getAllModelMetrics().select("model_uid", "AUC").show()  # doctest: +SKIP
    >>> best.getRocCurve().toPandas().plot(x="false_positive_rate")  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_BestModel.__doc__ or "")
    _python_backend = True
    # On the Python backend: every candidate's metrics row, their schema and the ROC curve.
    _metric_rows: list[Any] = []
    _metric_schema: T.StructType = T.StructType([])
    _roc: list[tuple[float, float]] = []

    def _set_metrics(
        self, rows: list[Any], schema: T.StructType, roc: list[tuple[float, float]]
    ) -> None:
        self._metric_rows, self._metric_schema, self._roc = list(rows), schema, list(roc)

    def _frame(self, method: str) -> DataFrame:
        java_obj = require_java_obj(
            self, f"BestModel.{method}", "load the saved BestModel in a classic session to read it"
        )
        return DataFrame(getattr(java_obj, method)(), SparkSession.active())

    def getAllModelMetrics(self) -> DataFrame:
        """One row per candidate: ``model_uid``, ``model_class``, the value it was ranked by, and
        every metric ComputeModelStatistics gives for the task."""
        if self._on_python():
            return SparkSession.active().createDataFrame(self._metric_rows, self._metric_schema)
        return self._frame("getAllModelMetrics")

    def getBestModelMetrics(self) -> DataFrame:
        """The row of :meth:`getAllModelMetrics` of the chosen model."""
        if self._on_python():
            metrics = self.getAllModelMetrics()
            return metrics.filter(metrics["model_uid"] == self.getBestModel().uid)
        return self._frame("getBestModelMetrics")

    def getRocCurve(self) -> DataFrame:
        """The chosen model's ROC curve (``false_positive_rate``, ``true_positive_rate``) on the
        data it was chosen on; empty unless the task has two classes and class scores."""
        if self._on_python():
            return SparkSession.active().createDataFrame(self._roc, ROC_SCHEMA)
        return self._frame("getRocCurve")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        model: Any = self.getBestModel()
        return model.transform(dataset)  # type: ignore[no-any-return]

    def _save_data(self, path: str) -> None:
        """The metrics and the ROC curve as the JVM model saves them: Parquet tables (the curve
        in one file, so that a reader keeps its order)."""
        spark = SparkSession.active()
        spark.createDataFrame(self._metric_rows, self._metric_schema).write.parquet(
            os.path.join(path, "allModelMetrics")
        )
        roc = spark.createDataFrame(self._roc, ROC_SCHEMA).coalesce(1)
        roc.write.parquet(os.path.join(path, "rocCurve"))

    def _load_data(self, path: str) -> None:
        spark = SparkSession.active()
        metrics = spark.read.parquet(os.path.join(path, "allModelMetrics"))
        curve = spark.read.parquet(os.path.join(path, "rocCurve")).collect()
        # Spark reads a table's files largest first, so a curve saved in several files comes back
        # out of order; both its rates only grow along it, which puts it back in order.
        roc = sorted((float(r[0]), float(r[1])) for r in curve)
        self._set_metrics(metrics.collect(), metrics.schema, roc)
