"""Arrow batches through the Python workers, on every Spark line and JDK.

Every Python-backend stage is a function from Arrow record batches to Arrow record batches, run
by ``mapInArrow``. On Spark 3.5 with Java 21 Spark's own Arrow (12.0.1) cannot run: it makes its
buffers with the ``DirectByteBuffer(long, int)`` constructor that JDK 21 removed, so every Arrow
transfer between the JVM and the Python workers fails ("sun.misc.Unsafe or
java.nio.DirectByteBuffer.<init>(long, int) not available"), Spark's own pandas UDFs included.
There the rows travel pickled instead (``rdd.mapPartitions``, as plain Python UDFs do) and each
worker builds the very Arrow batches ``mapInArrow`` would have given the function, and turns the
batches it yields back into rows: the same function, partitions, order and results.

``spark.mmlspark.python.transfer`` chooses: ``auto`` (the default: rows where Spark's Arrow cannot
run, Arrow everywhere else), ``arrow`` or ``rows`` (classic sessions only).

Pickled into the workers by value: imports nothing from mmlspark in the workers' code. The engine
(``mmlspark._engine``), whose partition functions the UDFs run, travels with them by value too.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from datetime import timezone
from typing import Any

from mmlspark import _engine

__all__ = ["TRANSFERS", "map_in_arrow", "python_udf", "transfer_of"]

TRANSFER_CONF = "spark.mmlspark.python.transfer"
TRANSFERS = ("auto", "arrow", "rows")

# Per classic session: whether its JVM's Arrow can make direct buffers.
_arrow_works: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _spark_arrow_works(spark: Any) -> bool:
    """False on a Spark before 4 (Arrow 12) whose driver runs Java 21 or later."""
    if spark not in _arrow_works:
        major = int(spark.version.split(".")[0])
        works = True
        if major < 4:
            from mmlspark.core.jvm import java_specification_version

            java = java_specification_version(spark)
            works = java.startswith("1.") or int(java.split(".")[0]) < 21
        _arrow_works[spark] = works
    return _arrow_works[spark]


def transfer_of(spark: Any) -> str:
    """``"arrow"`` or ``"rows"``: how the rows of `spark`'s Python-backend stages reach the
    Python workers (see the module's doc)."""
    from pyspark.sql.utils import is_remote

    setting = str(spark.conf.get(TRANSFER_CONF, "auto")).strip().lower()
    if setting not in TRANSFERS:
        raise ValueError(
            f"{TRANSFER_CONF} must be one of {', '.join(TRANSFERS)} but was {setting!r}"
        )
    if is_remote():
        if setting == "rows":
            raise ValueError(
                f"{TRANSFER_CONF}=rows needs a classic session: Spark Connect has no RDDs, "
                "and its results travel in Arrow anyway"
            )
        return "arrow"
    if setting == "auto":
        return "arrow" if _spark_arrow_works(spark) else "rows"
    return setting


def map_in_arrow(
    dataset: Any, function: Callable[[Iterator[Any]], Iterator[Any]], schema: Any
) -> Any:
    """``dataset.mapInArrow(function, schema)``, or its twin over pickled rows where the
    session's transfer is ``rows``. The engine's code that `function` names goes with it by value,
    so the Python workers need not have mmlspark (a Connect server we do not control)."""
    from pyspark import cloudpickle

    # cloudpickle pickles the package's submodules by value too; a module the engine keeps per
    # worker across tasks lives in the worker's sys.modules under a name of its own (ort._cache).
    cloudpickle.register_pickle_by_value(_engine)
    spark = dataset.sparkSession
    if transfer_of(spark) == "arrow":
        return dataset.mapInArrow(function, schema)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    in_schema = dataset.schema
    batch_rows = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000"))
    time_zone = str(spark.conf.get("spark.sql.session.timeZone"))
    if batch_rows <= 0:
        batch_rows = 1 << 31  # Spark's own meaning of 0 or less: no limit

    def rows_partition(rows: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
        return _rows_partition(function, in_schema, schema, batch_rows, time_zone, rows)

    return spark.createDataFrame(
        dataset.rdd.mapPartitions(rows_partition, preservesPartitioning=True),
        schema,
        verifySchema=False,
    )


def python_udf(spark: Any, function: Callable[..., Any], return_type: Any) -> Any:
    """`function` of one row as a Python UDF of `spark`'s sessions, Arrow-optimized where the
    session's transfer is ``arrow`` (pickled rows elsewhere); the engine's code goes with it by
    value. Unlike ``map_in_arrow``'s, its column is computed only where a query reads it."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(_engine)
    return F.udf(function, return_type, useArrow=transfer_of(spark) == "arrow")


def column_udf(
    spark: Any,
    function: Callable[[Iterator[Any]], Iterator[Any]],
    columns: int,
    return_type: Any,
) -> Any:
    """`function` of `columns` input columns (an iterator of their Arrow arrays, a tuple of them
    where there are several, to an iterator of Arrow arrays) as an Arrow UDF over columns: Spark
    sends it only the columns it reads and keeps the rest on its side, where the session has
    Arrow UDFs (Spark 4.1 on) and its transfer is ``arrow``; None elsewhere. Marked
    nondeterministic, so that reading several fields of its struct runs it once."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    arrow_udf = getattr(F, "arrow_udf", None)
    if arrow_udf is None or transfer_of(spark) != "arrow":
        return None
    import inspect
    import typing

    import pyarrow as pa  # type: ignore[import-untyped]

    cloudpickle.register_pickle_by_value(_engine)
    # Spark tells the kind of Arrow UDF from the type hints (an iterator of arrays, or of tuples
    # of them, to an iterator of arrays); this module's hints are strings, so they are set here.
    arrays: Any = pa.Array if columns == 1 else tuple[(pa.Array, ...)]
    (name,) = inspect.signature(function).parameters
    function.__annotations__ = {
        name: typing.Iterator[arrays],
        "return": typing.Iterator[pa.Array],
    }
    return arrow_udf(function, return_type).asNondeterministic()


# --- In the workers ---------------------------------------------------------------------------


def arrow_type(kind: Any, time_zone: str = "UTC") -> Any:
    """The Arrow type ``mapInArrow`` gives a column of Spark type `kind` (a user-defined type as
    its SQL type; timestamps labelled with the session's `time_zone`)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyspark.sql import types as T

    if isinstance(kind, T.UserDefinedType):
        return arrow_type(kind.sqlType(), time_zone)
    if isinstance(kind, T.StructType):
        return pa.struct(
            [pa.field(f.name, arrow_type(f.dataType, time_zone), f.nullable) for f in kind]
        )
    if isinstance(kind, T.ArrayType):
        return pa.list_(
            pa.field("element", arrow_type(kind.elementType, time_zone), kind.containsNull)
        )
    if isinstance(kind, T.MapType):
        return pa.map_(arrow_type(kind.keyType, time_zone), arrow_type(kind.valueType, time_zone))
    if isinstance(kind, T.DecimalType):
        return pa.decimal128(kind.precision, kind.scale)
    if isinstance(kind, T.TimestampType):
        return pa.timestamp("us", tz=time_zone)
    if isinstance(kind, T.TimestampNTZType):
        return pa.timestamp("us")
    simple = {
        T.BooleanType: pa.bool_(),
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.StringType: pa.string(),
        T.BinaryType: pa.binary(),
        T.DateType: pa.date32(),
        T.NullType: pa.null(),
    }
    for spark_type, arrow in simple.items():
        if isinstance(kind, spark_type):
            return arrow
    raise TypeError(f"no Arrow type for the Spark type {kind.simpleString()}")


def to_arrow_value(kind: Any, value: Any) -> Any:
    """A value of a pickled row (as ``df.rdd`` gives it) as pyarrow takes it for `kind`."""
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(kind, T.UserDefinedType):
        return to_arrow_value(kind.sqlType(), kind.serialize(value))
    if isinstance(kind, T.StructType):
        return {
            f.name: to_arrow_value(f.dataType, v) for f, v in zip(kind.fields, value, strict=True)
        }
    if isinstance(kind, T.ArrayType):
        return [to_arrow_value(kind.elementType, v) for v in value]
    if isinstance(kind, T.MapType):
        return [
            (to_arrow_value(kind.keyType, k), to_arrow_value(kind.valueType, v))
            for k, v in value.items()
        ]
    if isinstance(kind, T.BinaryType):
        return bytes(value)
    if isinstance(kind, T.TimestampType):
        # A pickled row's timestamp is the local wall-clock time, naive (as pyspark makes it).
        return value.astimezone(timezone.utc) if value.tzinfo is None else value
    return value


def from_arrow_value(kind: Any, value: Any) -> Any:
    """A value of an Arrow batch (``to_pylist``'s) as the row of a DataFrame of `kind` takes it."""
    from pyspark.sql import types as T

    if value is None:
        return None
    if isinstance(kind, T.UserDefinedType):
        return kind.deserialize(from_arrow_value(kind.sqlType(), value))
    if isinstance(kind, T.StructType):
        return tuple(from_arrow_value(f.dataType, value[f.name]) for f in kind.fields)
    if isinstance(kind, T.ArrayType):
        return [from_arrow_value(kind.elementType, v) for v in value]
    if isinstance(kind, T.MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return {
            from_arrow_value(kind.keyType, k): from_arrow_value(kind.valueType, v) for k, v in pairs
        }
    return value


def _rows_partition(
    function: Callable[[Iterator[Any]], Iterator[Any]],
    in_schema: Any,
    out_schema: Any,
    batch_rows: int,
    time_zone: str,
    rows: Iterator[Any],
) -> Iterator[tuple[Any, ...]]:
    import pyarrow as pa

    arrow_schema = pa.schema(
        [pa.field(f.name, arrow_type(f.dataType, time_zone), f.nullable) for f in in_schema.fields]
    )

    def batches() -> Iterator[Any]:
        chunk: list[Any] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == batch_rows:
                yield _batch(arrow_schema, in_schema, chunk)
                chunk = []
        if chunk:
            yield _batch(arrow_schema, in_schema, chunk)

    kinds = [f.dataType for f in out_schema.fields]
    for batch in function(batches()):
        columns = [batch.column(f.name).to_pylist() for f in out_schema.fields]
        for values in zip(*columns, strict=True):
            yield tuple(from_arrow_value(k, v) for k, v in zip(kinds, values, strict=True))


def _batch(arrow_schema: Any, in_schema: Any, rows: list[Any]) -> Any:
    import pyarrow as pa

    arrays = [
        pa.array([to_arrow_value(f.dataType, row[i]) for row in rows], arrow_schema.field(i).type)
        for i, f in enumerate(in_schema.fields)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
