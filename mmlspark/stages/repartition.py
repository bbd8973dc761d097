"""Repartition, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.core.checks import require
from mmlspark.stages._Repartition import _Repartition


class Repartition(_Repartition):
    __doc__ = _Repartition.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The rows spread evenly over ``n`` partitions (a shuffle), or the input as it is."""
        if self.getDisable():
            return dataset
        require(self, self.isDefined(self.n), "param 'n' must be set")
        return dataset.repartition(self.getN())
