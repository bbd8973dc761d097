"""DropColumns, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.core.checks import PythonParamChecks, distinct_names, require_cols
from mmlspark.stages._DropColumns import _DropColumns


class DropColumns(PythonParamChecks, _DropColumns):
    __doc__ = _DropColumns.__doc__
    _python_backend = True
    _python_param_checks = {"cols": distinct_names(empty_allowed=True)}

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input without the named columns, each of which must exist."""
        require_cols(self, dataset.schema)
        cols = self.getCols()
        return dataset.drop(*cols) if cols else dataset
