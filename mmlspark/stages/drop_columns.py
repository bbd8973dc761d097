"""DropColumns, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.core.checks import require
from mmlspark.stages._DropColumns import _DropColumns


class DropColumns(_DropColumns):
    __doc__ = _DropColumns.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input without the named columns; a name that is no column is passed over, as
        Spark's ``drop`` and SynapseML's DropColumns do."""
        require(self, self.isDefined(self.cols), "param 'cols' must be set")
        present = set(dataset.columns)
        cols = [c for c in self.getCols() if c in present]
        return dataset.drop(*cols) if cols else dataset
