"""FlattenBatch, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import encoder_type, quoted, require, schema_string
from mmlspark.stages._FlattenBatch import _FlattenBatch


class FlattenBatch(_FlattenBatch):
    __doc__ = _FlattenBatch.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each batch row as one row per element of its longest array (a null array counts as
        empty), element ``i`` of every array column in row ``i``, other columns repeated."""
        schema = dataset.schema
        arrays = [f for f in schema.fields if isinstance(f.dataType, T.ArrayType)]
        require(
            self,
            bool(arrays),
            "input must have at least one array column but has only "
            + schema_string(dataset, schema),
        )
        sizes = [
            F.when(F.col(quoted(f.name)).isNull(), 0).otherwise(F.size(F.col(quoted(f.name))))
            for f in arrays
        ]
        length = sizes[0] if len(sizes) == 1 else F.greatest(*sizes)
        index = f"__index_{self.uid}"
        # explode keeps each batch's elements in order and each partition's rows where they are
        exploded = dataset.select(
            F.col("*"), F.explode(F.when(length > 0, F.sequence(F.lit(0), length - 1))).alias(index)
        )
        columns: list[Column] = []
        for field in schema.fields:
            column, data_type = exploded[quoted(field.name)], field.dataType
            if isinstance(data_type, T.ArrayType):
                # get: null past the end of a shorter array
                column, data_type = F.get(column, F.col(quoted(index))), data_type.elementType
            # The JVM stage's rows come through Encoders.row, which widens interval types and
            # drops every column's metadata: a cast (a no-op where the type stays) does both.
            columns.append(column.cast(encoder_type(data_type)).alias(field.name))
        return exploded.select(*columns)
