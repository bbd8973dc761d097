"""BestModel with the metrics of every candidate and the ROC curve as DataFrames."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from mmlspark.automl._BestModel import _BestModel
from mmlspark.core.wrapper import require_java_obj


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

    def _frame(self, method: str) -> DataFrame:
        java_obj = require_java_obj(
            self, f"BestModel.{method}", "load the saved BestModel in a classic session to read it"
        )
        return DataFrame(getattr(java_obj, method)(), SparkSession.active())

    def getAllModelMetrics(self) -> DataFrame:
        """One row per candidate: ``model_uid``, ``model_class``, the value it was ranked by, and
        every metric ComputeModelStatistics gives for the task."""
        return self._frame("getAllModelMetrics")

    def getBestModelMetrics(self) -> DataFrame:
        """The row of :meth:`getAllModelMetrics` of the chosen model."""
        return self._frame("getBestModelMetrics")

    def getRocCurve(self) -> DataFrame:
        """The chosen model's ROC curve (``false_positive_rate``, ``true_positive_rate``) on the
        data it was chosen on; empty unless the task has two classes and class scores."""
        return self._frame("getRocCurve")
