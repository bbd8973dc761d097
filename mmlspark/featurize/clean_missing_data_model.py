"""CleanMissingDataModel, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import (
    is_numeric,
    quoted,
    require,
    require_absent,
    require_column,
    require_column_type,
    require_distinct,
)
from mmlspark.featurize._CleanMissingDataModel import _CleanMissingDataModel


def missing(column: Column, data_type: T.DataType) -> Column:
    """Whether a value is missing: null, or NaN in a floating-point column."""
    if isinstance(data_type, (T.DoubleType, T.FloatType)):
        return column.isNull() | F.isnan(column)
    return column.isNull()


def output_names(spec: Any) -> list[str]:
    """``outputCols``, or the input columns themselves (cleaned in place)."""
    return list(spec.outputCols if spec.outputCols is not None else spec.inputCols)


def cleaned_schema(stage: Any, spec: Any, schema: T.StructType) -> T.StructType:
    """The checks of ``CleanMissingDataParams.cleanedSchema``, in its order, and the schema with
    each output column added."""
    require(stage, spec.inputCols is not None, row_message("noInputCols"))
    ins, outs = list(spec.inputCols), output_names(spec)
    require(
        stage,
        len(ins) == len(outs),
        row_message("columnCount", inputs=len(ins), outputs=len(outs)),
    )
    require_distinct(stage, "outputCols", outs)
    custom = spec.cleaningMode == "Custom"
    require(stage, not custom or spec.customValue is not None, row_message("noCustomValue"))
    fields = list(schema.fields)
    for name, out in zip(ins, outs, strict=True):
        if custom:
            field = require_column(stage, schema, name)
        else:
            field = require_column_type(stage, schema, name, "a numeric type", is_numeric)
        if out != name:
            require_absent(stage, T.StructType(fields), out)
            fields.append(T.StructField(out, field.dataType, True))
    return T.StructType(fields)


class CleanMissingDataModel(_CleanMissingDataModel):
    __doc__ = _CleanMissingDataModel.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each input column's missing values filled with its entry of ``fillValues``, cast to
        the column's type (a mean through a double), into its output column."""
        spec = self._spec()
        cleaned_schema(self, spec, dataset.schema)
        fills, ins = list(spec.fillValues), list(spec.inputCols or ())
        require(
            self,
            len(fills) == len(ins),
            row_message("fillCount", fills=len(fills), inputs=len(ins)),
        )
        through_double = spec.cleaningMode == "Mean"
        out = dataset
        for name, target, fill in zip(ins, output_names(spec), fills, strict=True):
            data_type = dataset.schema[name].dataType
            column = F.col(quoted(name))
            value = F.lit(fill).cast(T.DoubleType()) if through_double else F.lit(fill)
            filled = F.when(missing(column, data_type), value.cast(data_type)).otherwise(column)
            out = out.withColumn(target, filled)
        return out
