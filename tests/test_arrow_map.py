"""The Python backend's two ways of moving rows to its Arrow functions: Spark's ``mapInArrow``,
and pickled rows made into the same Arrow batches in the worker (Spark 3.5 on Java 21, whose Arrow
cannot run). The function must see the very batches either way, and the stages give the same
results. On Spark 3.5 with JDK 21 itself, ``test_lines.py`` runs the camera-trap job this way."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import numpy as np
import onnx_models
import pytest
from pyspark import cloudpickle
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql import types as T

from mmlspark.core.arrow_map import TRANSFER_CONF, map_in_arrow, transfer_of
from mmlspark.image import read_images
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer
from mmlspark.stages import FixedMiniBatchTransformer

SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType(), False),
        T.StructField("flag", T.BooleanType()),
        T.StructField("small", T.ByteType()),
        T.StructField("short", T.ShortType()),
        T.StructField("int", T.IntegerType()),
        T.StructField("float", T.FloatType()),
        T.StructField("double", T.DoubleType()),
        T.StructField("text", T.StringType()),
        T.StructField("bytes", T.BinaryType()),
        T.StructField("day", T.DateType()),
        T.StructField("time", T.TimestampType()),
        T.StructField("money", T.DecimalType(10, 3)),
        T.StructField("floats", T.ArrayType(T.FloatType())),
        T.StructField("nested", T.ArrayType(T.ArrayType(T.IntegerType()))),
        T.StructField("scores", T.MapType(T.StringType(), T.DoubleType())),
        T.StructField(
            "image",
            T.StructType(
                [
                    T.StructField("origin", T.StringType()),
                    T.StructField("height", T.IntegerType()),
                    T.StructField("data", T.BinaryType()),
                ]
            ),
        ),
        T.StructField("vector", VectorUDT()),
    ]
)


def _row(i: int) -> tuple:
    if i % 5 == 4:  # every nullable column null
        return (i, *([None] * (len(SCHEMA.fields) - 1)))
    vector = DenseVector([i, -1.5]) if i % 2 else SparseVector(4, [1, 3], [float(i), 2.0])
    return (
        i,
        i % 3 == 0,
        i - 128 if i < 256 else 7,
        -i,
        i * 1000,
        i / 4,
        i / 3,
        f"row {i} é",
        bytes(range(i % 7)),
        dt.date(2024, 1, 1) + dt.timedelta(days=i),
        dt.datetime(2024, 3, 31, 1, 30) + dt.timedelta(minutes=37 * i),
        Decimal(i) / Decimal(8),
        [float(i), None, 0.5],
        [[i], [], None],
        {"a": float(i), "b": None},
        (f"file:/photo{i}.jpg", i, bytes([i % 256]) * 3),
        vector,
    )


# The functions below run in the Python workers, which cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@contextmanager
def conf(spark, key: str, value: str | None) -> Iterator[None]:
    """The session setting `key` set to `value` (None: unset) inside the block, then restored."""
    previous = spark.conf.get(key, None)
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def transfer(spark, name: str | None):
    return conf(spark, TRANSFER_CONF, name)


def _seen(batches):
    """Each row as the function sees it (its batch's schema and its values), in a new column,
    after the row's own columns."""
    import pyarrow as pa

    for batch in batches:
        seen = [
            f"{batch.num_rows} | {batch.schema} | {batch.slice(i, 1).to_pylist()}"
            for i in range(batch.num_rows)
        ]
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(seen, pa.string())], names=[*batch.schema.names, "seen"]
        )


def _collect_both(spark, dataset, function, schema):
    out = {}
    for name in ("arrow", "rows"):
        with transfer(spark, name):
            assert transfer_of(spark) == name
            out[name] = map_in_arrow(dataset, function, schema).collect()
    return out["arrow"], out["rows"]


def test_the_function_sees_the_batches_mapinarrow_gives_it_and_its_rows_come_back(spark):
    data = spark.createDataFrame([_row(i) for i in range(23)], SCHEMA).repartition(3)
    schema = T.StructType([*SCHEMA.fields, T.StructField("seen", T.StringType())])
    with transfer(spark, "arrow"):
        partitions = data.rdd.glom().map(len).collect()
    arrow, rows = _collect_both(spark, data, _seen, schema)
    assert len(rows) == 23 and sorted(r["id"] for r in rows) == list(range(23))
    # The same rows in the same order (the partitions and their order are kept), with every value
    # (timestamps, decimals, maps, vectors, nulls) back as it went in, and the same batch seen.
    assert rows == arrow
    assert [r["seen"].split(" | ")[0] for r in rows] == [
        str(n) for n in partitions for _ in range(n)
    ]
    by_id = {r["id"]: r for r in rows}
    original = {r["id"]: r for r in data.collect()}
    for i, row in by_id.items():
        assert row[: len(SCHEMA.fields)] == original[i], i


def test_batches_hold_at_most_spark_s_arrow_records_per_batch(spark):
    data = spark.range(0, 25, numPartitions=1)
    schema = T.StructType([*data.schema.fields, T.StructField("seen", T.StringType())])
    with conf(spark, "spark.sql.execution.arrow.maxRecordsPerBatch", "10"):
        arrow, rows = _collect_both(spark, data, _seen, schema)
    assert rows == arrow
    assert [r["seen"].split(" | ")[0] for r in rows] == ["10"] * 20 + ["5"] * 5


def test_a_function_may_change_the_row_count_and_yield_empty_batches(spark):
    import pyarrow as pa

    def odd_twice(batches):
        yield pa.RecordBatch.from_pydict({"id": pa.array([], pa.int64())})
        for batch in batches:
            ids = [i for i in batch.column("id").to_pylist() if i % 2 for _ in range(2)]
            yield pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64())})

    data = spark.range(0, 9, numPartitions=2)
    arrow, rows = _collect_both(spark, data, odd_twice, data.schema)
    assert rows == arrow and [r["id"] for r in rows] == [1, 1, 3, 3, 5, 5, 7, 7]


def test_photos_read_transformed_scored_and_batched_alike_over_rows(spark, tmp_path):
    import cv2

    rng = np.random.default_rng(5)
    for i in range(7):
        cv2.imwrite(str(tmp_path / f"p{i}.png"), rng.integers(0, 256, (20 + i, 30, 3), np.uint8))
    (tmp_path / "broken.png").write_bytes(b"not a png")
    model = (
        ONNXModel()
        .setBackend("python")
        .setModelPayload(onnx_models.small_cnn(classes=4, size=8))
        .setFeedDict({"image": "tensor"})
        .setFetchDict({"logits": "logits"})
        .setSoftMaxDict({"logits": "probability"})
        .setArgMaxDict({"logits": "top"})
        .setMiniBatchSize(3)
    )
    transformer = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .setBackend("python")
        .resize(8, 8)
        .normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25], colorScaleFactor=1 / 255)
    )
    batcher = FixedMiniBatchTransformer(batchSize=3).setBackend("python")
    outputs = {}
    for name in ("arrow", "rows"):
        with transfer(spark, name):
            images = read_images(spark, str(tmp_path), backend="python")
            scored = model.transform(transformer.transform(images)).orderBy("path")
            rows = scored.drop("tensor").collect()  # the image too: read where selected
            batched = batcher.transform(scored.select("path", "top")).collect()
            outputs[name] = (rows, batched, scored.schema)
    arrow, rows = outputs["arrow"], outputs["rows"]
    assert rows[2] == arrow[2]  # the same columns, types and metadata
    assert len(rows[0]) == 8 and [r["path"].rsplit("/", 1)[1] for r in rows[0]][0] == "broken.png"
    # The same onnxruntime on the same tensors: equal to the last bit, errors included.
    assert rows[0] == arrow[0]
    assert sum(r["error"] is None and r["onnxError"] is None for r in rows[0]) == 7
    assert sorted(map(tuple, rows[1])) == sorted(map(tuple, arrow[1]))
    assert sum(len(b["path"]) for b in rows[1]) == 8


def test_the_transfer_setting_is_checked_and_auto_is_arrow_where_spark_s_arrow_runs(spark):
    with transfer(spark, None):
        # These machines run pyspark's newest line on Java 17: Spark's Arrow runs.
        assert transfer_of(spark) == "arrow"
    with transfer(spark, "Sideways"), pytest.raises(ValueError, match="auto, arrow, rows"):
        transfer_of(spark)
