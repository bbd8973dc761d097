"""What the stages share on the Python backend: the schema checks of the JVM's
``SchemaUtils`` with its messages (the params' validators are in ``mmlspark.core.validators``).

Every failure reads as the JVM stage's does, ``"<ClassName> <uid>: <message>"``, and is raised
as a ValueError before any Spark job runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message

__all__ = [
    "batch_type",
    "catalog_string",
    "encoder_type",
    "fail",
    "is_numeric",
    "is_vector",
    "quoted",
    "require",
    "require_absent",
    "require_column",
    "require_column_type",
    "require_cols",
    "require_distinct",
    "schema_string",
]

# spark.sql.debug.maxToStringFields: how many fields a struct's simpleString lists.
_MAX_FIELDS_KEY = "spark.sql.debug.maxToStringFields"


def fail(stage: Any, message: str) -> NoReturn:
    """Raises the JVM stage's error: ``"<ClassName> <uid>: <message>"``."""
    raise ValueError(f"{type(stage).__name__} {stage.uid}: {message}")


def require(stage: Any, condition: bool, message: str) -> None:
    """Fails with `message` unless `condition` holds."""
    if not condition:
        fail(stage, message)


def require_column(stage: Any, schema: T.StructType, column: str) -> T.StructField:
    """The field named `column` (exactly), or a failure listing the columns that do exist."""
    for field in schema.fields:
        if field.name == column:
            return field
    fail(
        stage,
        row_message("noColumn", column=column, available=", ".join(schema.fieldNames())),
    )


def require_column_type(
    stage: Any,
    schema: T.StructType,
    column: str,
    expected: str,
    accepts: Callable[[T.DataType], bool],
) -> T.StructField:
    """The field named `column`, whose type must satisfy `accepts` (described as `expected`)."""
    field = require_column(stage, schema, column)
    if not accepts(field.dataType):
        fail(
            stage,
            row_message(
                "columnType",
                column=column,
                expected=expected,
                actual=catalog_string(field.dataType),
            ),
        )
    return field


def require_absent(stage: Any, schema: T.StructType, column: str) -> None:
    """An output column must not overwrite an existing one."""
    if column in schema.fieldNames():
        fail(stage, row_message("columnExists", column=column))


def require_distinct(stage: Any, what: str, names: Sequence[str]) -> None:
    """`names` must not repeat; the failure names each repeated one once, in order."""
    seen: set[str] = set()
    repeated: list[str] = []
    for name in names:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    if repeated:
        fail(stage, row_message("notDistinct", what=what, repeated=", ".join(repeated)))


def require_cols(stage: Any, schema: T.StructType) -> list[T.StructField]:
    """The fields of the columns the ``cols`` param names, in that order; each must exist
    (``ColumnListParams.requireCols``)."""
    require(stage, stage.isDefined(stage.cols), "param 'cols' must be set")
    return [require_column(stage, schema, c) for c in stage.getOrDefault(stage.cols)]


def quoted(name: str) -> str:
    """`name` as a column reference that is never parsed (dots and spaces stay literal)."""
    return "`" + name.replace("`", "``") + "`"


def is_numeric(data_type: T.DataType) -> bool:
    return isinstance(data_type, T.NumericType)


def is_vector(data_type: T.DataType) -> bool:
    """Whether `data_type` is the ``pyspark.ml`` vector type (the JVM's ``VectorType``)."""
    return isinstance(data_type, VectorUDT)


def catalog_string(data_type: T.DataType) -> str:
    """Spark's ``DataType.catalogString``: a user-defined type reads as the type it is stored
    as, struct fields are never elided."""
    if isinstance(data_type, T.UserDefinedType):
        return catalog_string(data_type.sqlType())
    if isinstance(data_type, T.StructType):
        fields = ",".join(f"{f.name}:{catalog_string(f.dataType)}" for f in data_type.fields)
        return f"struct<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"array<{catalog_string(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{catalog_string(data_type.keyType)},{catalog_string(data_type.valueType)}>"
    return data_type.simpleString()


def _simple_string(data_type: T.DataType, max_fields: int) -> str:
    if isinstance(data_type, T.StructType):
        fields = [f"{f.name}:{_simple_string(f.dataType, max_fields)}" for f in data_type.fields]
        if len(fields) > max_fields:
            shown = max(0, max_fields)
            return (
                "struct<"
                + "".join(f + "," for f in fields[:shown])
                + f"... {len(fields) - shown} more fields>"
            )
        return "struct<" + ",".join(fields) + ">"
    if isinstance(data_type, T.ArrayType):
        return f"array<{_simple_string(data_type.elementType, max_fields)}>"
    if isinstance(data_type, T.MapType):
        key = _simple_string(data_type.keyType, max_fields)
        return f"map<{key},{_simple_string(data_type.valueType, max_fields)}>"
    return data_type.simpleString()


def schema_string(dataset: DataFrame, schema: T.StructType) -> str:
    """Spark's ``StructType.simpleString`` of `schema`: structs list at most
    ``spark.sql.debug.maxToStringFields`` fields, then say how many more there are."""
    max_fields = int(dataset.sparkSession.conf.get(_MAX_FIELDS_KEY, "25") or "25")
    return _simple_string(schema, max_fields)


def encoder_type(data_type: T.DataType) -> T.DataType:
    """`data_type` as a JVM stage that builds its rows with ``Encoders.row`` declares it: interval
    types widen to their full range (``interval day`` becomes ``interval day to second``)."""
    if isinstance(data_type, T.DayTimeIntervalType):
        return T.DayTimeIntervalType(T.DayTimeIntervalType.DAY, T.DayTimeIntervalType.SECOND)
    if isinstance(data_type, T.YearMonthIntervalType):
        return T.YearMonthIntervalType(T.YearMonthIntervalType.YEAR, T.YearMonthIntervalType.MONTH)
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [
                T.StructField(f.name, encoder_type(f.dataType), f.nullable, f.metadata)
                for f in data_type.fields
            ]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(encoder_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, T.MapType):
        return T.MapType(
            encoder_type(data_type.keyType),
            encoder_type(data_type.valueType),
            data_type.valueContainsNull,
        )
    return data_type


def batch_type(schema: T.StructType) -> T.StructType:
    """The schema of the mini-batch transformers' output (``MiniBatching.batchSchema``): every
    column an array of its values, not null, its metadata dropped."""
    return T.StructType(
        [
            T.StructField(f.name, T.ArrayType(encoder_type(f.dataType), f.nullable), False)
            for f in schema.fields
        ]
    )
