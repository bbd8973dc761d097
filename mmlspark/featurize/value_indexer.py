"""ValueIndexer, on the JVM or the Python backend."""

from __future__ import annotations

from typing import cast

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import catalog_string, quoted
from mmlspark.core.wrapper import on_python_backend
from mmlspark.featurize._ValueIndexer import _ValueIndexer
from mmlspark.featurize.clean_missing_data_model import missing
from mmlspark.featurize.value_indexer_model import ValueIndexerModel, indexed_schema


class ValueIndexer(_ValueIndexer):
    __doc__ = _ValueIndexer.__doc__
    _python_backend = True

    def _fit(self, dataset: DataFrame) -> ValueIndexerModel:
        """On the Python backend: the distinct values in one Spark job, sorted by Spark, missing
        ones (null, NaN) as a null after the levels, written as text by Spark."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        spec = self._spec()
        indexed_schema(self, spec, dataset.schema)
        name = cast(str, spec.inputCol)  # set: indexed_schema found it
        data_type = dataset.schema[name].dataType
        column = dataset[quoted(name)]
        present = F.when(~missing(column, data_type), column)
        rows = (
            dataset.select(present.alias("level"))
            .distinct()
            .orderBy(F.col("level").asc_nulls_last())
            .select(F.col("level").cast(T.StringType()))
            .collect()
        )
        model = on_python_backend(ValueIndexerModel)
        model._resetUid(self.uid)
        self._copyValues(model)
        return model.setParams(  # type: ignore[no-any-return]
            levels=[row[0] for row in rows if row[0] is not None],
            dataType=catalog_string(data_type),
            hasNullLevel=any(row[0] is None for row in rows),
        )
