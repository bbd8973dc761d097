"""EnsembleByKey, on the JVM or the Python backend; its getColNames gives the output names also
when they were not set."""

from __future__ import annotations

from functools import reduce

import pyspark
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import is_remote

from mmlspark.core.checks import (
    is_numeric,
    is_vector,
    quoted,
    require,
    require_absent,
    require_column,
    require_column_type,
    require_distinct,
)
from mmlspark.core.compat import connect_ml_supported
from mmlspark.stages._EnsembleByKey import _EnsembleByKey


class EnsembleByKey(_EnsembleByKey):
    __doc__ = _EnsembleByKey.__doc__
    _python_backend = True

    def getColNames(self) -> list[str]:
        """The names of the output columns: those set, else ``mean(<col>)`` for each of ``cols``,
        the names the transform gives them (as SynapseML's getter returns them)."""
        names = super().getColNames()
        if names or not self.isDefined(self.cols):
            return names
        return [f"mean({c})" for c in self.getCols()]

    def _output_schema(self, schema: T.StructType) -> list[T.StructField]:
        """The JVM stage's transformSchema: the fields of the output, checked in its order."""
        require(
            self,
            self.isDefined(self.keys) and self.isDefined(self.cols),
            "params 'keys' and 'cols' must be set",
        )
        keys, cols = self.getKeys(), self.getCols()
        set_names = self.getOrDefault(self.colNames)
        require(
            self,
            not set_names or len(set_names) == len(cols),
            f"colNames has {len(set_names)} names but cols has {len(cols)} columns",
        )
        key_fields = [require_column(self, schema, k) for k in keys]
        value_fields = []
        for c, out in zip(cols, self.getColNames(), strict=True):
            field = require_column_type(
                self, schema, c, "numeric or vector", lambda t: is_numeric(t) or is_vector(t)
            )
            value_fields.append(
                T.StructField(out, field.dataType if is_vector(field.dataType) else T.DoubleType())
            )
        if self.getCollapseGroup():
            names = [f.name for f in key_fields + value_fields]
            require_distinct(self, "keys and output columns", names)
            return key_fields + value_fields
        for field in value_fields:
            require_absent(self, schema, field.name)
        return list(schema.fields) + value_fields

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each group's means: one row per group, or every row with its group's means."""
        from pyspark.ml.stat import Summarizer

        schema = dataset.schema
        out_fields = self._output_schema(schema)
        keys = self.getKeys()
        aggregates: list[Column] = []
        for c, out in zip(self.getCols(), self.getColNames(), strict=True):
            value = F.col(quoted(c))
            if is_vector(schema[c].dataType):
                # Spark's own Summarizer, as on the JVM: the same sums, the same failures (a null
                # vector, vectors of different sizes in one group)
                require(
                    self,
                    not is_remote() or connect_ml_supported(),
                    f"the mean of the vector column '{c}' needs Spark's Summarizer, which the "
                    f"Spark Connect client of pyspark {pyspark.__version__} cannot call; use "
                    "pyspark 4.0 or newer, or a classic session",
                )
                mean = Summarizer.mean(value)
            else:
                mean = F.avg(value.cast(T.DoubleType()))
            aggregates.append(mean.alias(out))
        grouped = dataset.groupBy(*[F.col(quoted(k)) for k in keys]).agg(*aggregates)
        if self.getCollapseGroup():
            return grouped
        renamed = reduce(lambda df, k: df.withColumnRenamed(k, f"__key_{k}"), keys, grouped)
        # Null-safe equality keeps the rows whose key is null with their group.
        condition = reduce(
            lambda a, b: a & b,
            [dataset[quoted(k)].eqNullSafe(renamed[quoted(f"__key_{k}")]) for k in keys],
        )
        joined = dataset.join(renamed, condition, "left")
        return joined.select(*[F.col(quoted(f.name)) for f in out_fields])
