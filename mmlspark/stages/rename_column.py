"""RenameColumn, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import require, require_absent, require_column
from mmlspark.stages._RenameColumn import _RenameColumn


class RenameColumn(_RenameColumn):
    __doc__ = _RenameColumn.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input with ``inputCol`` renamed to ``outputCol``, which must not name another
        existing column; renaming a column to its own name changes nothing."""
        require(
            self,
            self.isDefined(self.inputCol) and self.isDefined(self.outputCol),
            row_message("renameParams"),
        )
        schema = dataset.schema
        require_column(self, schema, self.getInputCol())
        if self.getOutputCol() == self.getInputCol():
            return dataset
        require_absent(self, schema, self.getOutputCol())
        return dataset.withColumnRenamed(self.getInputCol(), self.getOutputCol())
