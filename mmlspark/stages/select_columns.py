"""SelectColumns, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.core.checks import quoted, require_cols
from mmlspark.stages._SelectColumns import _SelectColumns


class SelectColumns(_SelectColumns):
    __doc__ = _SelectColumns.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The named columns, in the order named; each must exist."""
        require_cols(self, dataset.schema)
        return dataset.select(*[dataset[quoted(c)] for c in self.getCols()])
