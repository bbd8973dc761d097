"""DropColumns, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.core.checks import require_cols
from mmlspark.stages._DropColumns import _DropColumns


class DropColumns(_DropColumns):
    __doc__ = _DropColumns.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input without the named columns, each of which must exist."""
        require_cols(self, dataset.schema)
        cols = self.getCols()
        return dataset.drop(*cols) if cols else dataset
