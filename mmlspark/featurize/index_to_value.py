"""IndexToValue, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any, cast

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import is_numeric, quoted, require, require_absent, require_column_type
from mmlspark.featurize._IndexToValue import _IndexToValue
from mmlspark.featurize.value_indexer_model import VALUE_TYPE_KEY


def levels(stage: Any, spec: Any, schema: T.StructType) -> tuple[list[str], str]:
    """The levels the index column's nominal attribute names, and their type (DDL)."""
    field = require_column_type(stage, schema, spec.inputCol, "a numeric type", is_numeric)
    attribute = (field.metadata or {}).get("ml_attr") or {}
    values = attribute.get("vals") if attribute.get("type") == "nominal" else None
    require(stage, values is not None, row_message("noLevels", column=spec.inputCol))
    return list(values or ()), str(field.metadata.get(VALUE_TYPE_KEY, "string"))


class IndexToValue(_IndexToValue):
    __doc__ = _IndexToValue.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input with ``outputCol``, the level each index names (null where none)."""
        spec = self._spec()
        values, value_type = levels(self, spec, dataset.schema)
        # both set: levels found the one, require_absent checks the other
        name, output = cast(str, spec.inputCol), cast(str, spec.outputCol)
        require_absent(self, dataset.schema, output)
        index = F.col(quoted(name))
        if not values:
            value = F.lit(None).cast(value_type)
        else:
            typed = F.array(*[F.lit(v).cast(value_type) for v in values])
            # element_at is 1-based; an index outside the levels gives null.
            inside = (index >= 0) & (index < len(values))
            value = F.when(inside, F.element_at(typed, index.cast("int") + 1))
        return dataset.withColumn(output, value)
