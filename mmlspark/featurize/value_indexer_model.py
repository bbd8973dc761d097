"""ValueIndexerModel, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any, cast

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import quoted, require_absent, require_column_type
from mmlspark.featurize._ValueIndexerModel import _ValueIndexerModel
from mmlspark.featurize.clean_missing_data_model import missing

# What an indexed column holds, as errors name it (ValueIndexer.Indexable).
INDEXABLE = "a string, boolean or numeric type"
# The metadata key next to the nominal attribute that names the levels' Spark SQL type.
VALUE_TYPE_KEY = "mmlspark_value_type"


def indexable(data_type: T.DataType) -> bool:
    return isinstance(data_type, (T.StringType, T.BooleanType, T.NumericType))


def indexed_schema(stage: Any, spec: Any, schema: T.StructType) -> None:
    """The checks of ``ValueIndexerParams.indexedSchema``: ``inputCol`` indexable,
    ``outputCol`` new."""
    require_column_type(stage, schema, spec.inputCol, INDEXABLE, indexable)
    require_absent(stage, schema, spec.outputCol)


def index_metadata(spec: Any) -> dict[str, Any]:
    """The index column's metadata as the JVM model writes it: Spark's nominal attribute naming
    the levels, and the levels' type beside it."""
    attribute = {"type": "nominal", "name": spec.outputCol, "vals": list(spec.levels)}
    return {"ml_attr": attribute, VALUE_TYPE_KEY: spec.dataType}


class ValueIndexerModel(_ValueIndexerModel):
    __doc__ = _ValueIndexerModel.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input with ``outputCol``, each value's index in ``levels`` (missing values after
        the levels, unseen ones after those)."""
        spec = self._spec()
        indexed_schema(self, spec, dataset.schema)
        # both set: indexed_schema found the one and not the other
        name, output = cast(str, spec.inputCol), cast(str, spec.outputCol)
        data_type = dataset.schema[name].dataType
        column = F.col(quoted(name))
        n = len(spec.levels)
        unseen = n + 1 if spec.hasNullLevel else n
        # array_position is 1-based, 0 where the value is no level.
        if n == 0:
            position = F.lit(0)
        else:
            levels = F.array(*[F.lit(level).cast(data_type) for level in spec.levels])
            position = F.call_function("array_position", levels, column)
        index = (
            F.when(missing(column, data_type), F.lit(n))
            .when(position == 0, F.lit(unseen))
            .otherwise(position - 1)
            .cast(T.IntegerType())
        )
        # withMetadata: Spark Connect's withColumn drops an alias's metadata
        return dataset.withColumn(output, index).withMetadata(output, index_metadata(spec))
