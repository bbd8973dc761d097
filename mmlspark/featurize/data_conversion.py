"""DataConversion, on the JVM or the Python backend."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import catalog_string, fail, quoted, require, require_column
from mmlspark.core.wrapper import on_python_backend
from mmlspark.featurize._DataConversion import _DataConversion
from mmlspark.featurize.index_to_value import IndexToValue, levels
from mmlspark.featurize.value_indexer import ValueIndexer
from mmlspark.featurize.value_indexer_model import INDEXABLE, index_metadata, indexable

# The Spark SQL type each type-valued target names (DataConversion.castTypes).
CAST_TYPES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(),
    "byte": T.ByteType(),
    "short": T.ShortType(),
    "integer": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
}
CAST_SOURCES = "a numeric, boolean or string column (a timestamp converts to long or string)"
DATE_SOURCES = "a string or long column"


def _castable(data_type: T.DataType) -> bool:
    return isinstance(data_type, (T.NumericType, T.BooleanType, T.StringType))


def _unused(schema: T.StructType, name: str) -> str:
    i = 0
    while f"__{name}_{i}" in schema.fieldNames():
        i += 1
    return f"__{name}_{i}"


class DataConversion(_DataConversion):
    __doc__ = _DataConversion.__doc__
    _python_backend = True

    def _check(self, schema: T.StructType) -> None:
        """The checks of the JVM stage's transformSchema."""
        spec = self._spec()
        require(self, spec.cols is not None, row_message("paramNotSet", param="cols"))
        require(self, spec.convertTo is not None, row_message("paramNotSet", param="convertTo"))
        target = spec.convertTo
        for name in spec.cols or ():
            data_type = require_column(self, schema, name).dataType

            def refuse(expected: str, name: str = name, data_type: T.DataType = data_type) -> None:
                fail(
                    self,
                    row_message(
                        "noConversion",
                        target=target,
                        expected=expected,
                        column=name,
                        actual=catalog_string(data_type),
                    ),
                )

            if target == "toCategorical":
                if not indexable(data_type):
                    refuse(INDEXABLE)
            elif target == "clearCategorical":
                levels(self, SimpleNamespace(inputCol=name), schema)
            elif target == "date":
                if not isinstance(data_type, (T.StringType, T.LongType)):
                    refuse(DATE_SOURCES)
            elif isinstance(data_type, T.TimestampType):
                if target not in ("long", "string"):
                    refuse(CAST_SOURCES)
            elif not _castable(data_type):
                refuse(CAST_SOURCES)

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each of ``cols`` converted in place, as the JVM stage converts it."""
        self._check(dataset.schema)
        spec = self._spec()
        for name in spec.cols or ():
            dataset = self._convert(dataset, name, spec)
        return dataset

    def _convert(self, df: DataFrame, name: str, spec: Any) -> DataFrame:
        data_type = df.schema[name].dataType
        column = F.col(quoted(name))
        target = spec.convertTo
        fmt = F.lit(spec.dateTimeFormat)
        if target == "toCategorical":
            temporary = _unused(df.schema, name)
            indexer = on_python_backend(ValueIndexer, inputCol=name, outputCol=temporary)
            indexer._resetUid(self.uid)
            model = indexer.fit(df)
            metadata = index_metadata(SimpleNamespace(**{**vars(model._spec()), "outputCol": name}))
            return _replace(model.transform(df), name, temporary, metadata)
        if target == "clearCategorical":
            temporary = _unused(df.schema, name)
            back = on_python_backend(IndexToValue, inputCol=name, outputCol=temporary)
            back._resetUid(self.uid)
            return _replace(back.transform(df), name, temporary, {})
        if target == "date" and isinstance(data_type, T.StringType):
            return df.withColumn(name, F.call_function("try_to_timestamp", column, fmt))
        if target == "date":
            return df.withColumn(name, F.call_function("timestamp_millis", column))
        if target == "long" and isinstance(data_type, T.TimestampType):
            return df.withColumn(name, F.call_function("unix_millis", column))
        if target == "string" and isinstance(data_type, T.TimestampType):
            return df.withColumn(name, F.call_function("date_format", column, fmt))
        # try_cast: a value the type cannot hold is null, with ANSI mode on or off.
        sql_type = CAST_TYPES[target].simpleString().upper()
        return df.withColumn(name, F.expr(f"try_cast({quoted(name)} AS {sql_type})"))


def _replace(df: DataFrame, name: str, temporary: str, metadata: dict[str, Any]) -> DataFrame:
    """`df` with `name` replaced, in its place, by `temporary` (dropped) carrying `metadata`."""
    # withMetadata: Spark Connect's withColumn drops an alias's metadata
    out = df.withColumn(name, F.col(quoted(temporary))).drop(temporary)
    return out.withMetadata(name, metadata)
