"""The Python backend of the mini-batchers (MiniBatchTransformer, BufferedMiniBatchTransformer,
DynamicMiniBatchTransformer), Timer and TimerModel, ImageSetAugmenter and UnrollBinaryImage
against their JVM stages, in the pattern of test_python_stages.py and test_python_images.py: one
stage run on the JVM and a copy of it (the same uid and params) on the Python backend over the
same DataFrame, outputs compared in schema (names, types, nullability, metadata) and rows, errors
in their text; pixels and vectors also against opencv-python and numpy. The last test runs them
on a Spark Connect server without the jar.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
import pyarrow as pa
import pytest
from image_fixtures import encode, pattern, with_exif_orientation
from pyspark import StorageLevel
from pyspark.ml.base import Transformer
from pyspark.ml.feature import SQLTransformer
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from test_python_images import (
    DECODE_ERRORS,
    ENCODED_SCHEMA,
    STRUCTS_SCHEMA,
    _same_schema,
    _same_value,
    image_struct,
)
from test_python_images import assert_same as assert_same_images
from test_python_stages import assert_fails_alike, assert_same, collected, pair

from mmlspark._engine.batching import buffered_batches, dynamic_batches
from mmlspark.image import ImageDecoder, UnrollBinaryImage
from mmlspark.opencv import ImageSetAugmenter
from mmlspark.stages import (
    BufferedMiniBatchTransformer,
    ClassBalancer,
    ClassBalancerModel,
    DynamicMiniBatchTransformer,
    FlattenBatch,
    MiniBatchTransformer,
    SelectColumns,
    Timer,
    TimerModel,
)
from mmlspark.train import TrainClassifier

# -- the mini-batchers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rows(spark) -> DataFrame:
    """11 rows in 3 partitions of Spark's own making, with strings, an
    interval (which the JVM's row encoder widens), a struct, metadata and nulls."""
    return spark.range(0, 11, 1, 3).select(
        F.col("id"),
        F.when(F.col("id") % 4 != 1, F.concat(F.lit("s"), F.col("id"))).alias(
            "s", metadata={"m": 1}
        ),
        F.expr("cast(make_dt_interval(id) as interval day)").alias("day"),
        F.struct(F.col("id").alias("x"), F.array(F.col("id")).alias("xs")).alias("st"),
    )


def _partition_ids(df: DataFrame) -> list[list[int]]:
    """The ids of each partition of `df`, in order."""
    return df.rdd.glom().map(lambda part: [r["id"] for r in part]).collect()


BATCHERS = [
    pytest.param(lambda: MiniBatchTransformer(miniBatchSize=4), id="fixed-4"),
    # a fast source: no batch stays open a minute, so the batches are the fixed ones on both
    pytest.param(
        lambda: BufferedMiniBatchTransformer(miniBatchSize=3, maxBufferMillis=60_000),
        id="buffered-3",
    ),
    pytest.param(lambda: DynamicMiniBatchTransformer(maxBatchSize=1), id="dynamic-1"),
]


@pytest.mark.parametrize("make", BATCHERS)
def test_batches_as_the_jvm(rows, make):
    jvm, python = pair(make())
    batched = assert_same(jvm.transform(rows), python.transform(rows), ordered=True)
    # each partition's rows in order, cut every `size` rows
    size = jvm.getOrDefault("maxBatchSize" if jvm.hasParam("maxBatchSize") else "miniBatchSize")
    expected = [
        part[i : i + size] for part in _partition_ids(rows) for i in range(0, len(part), size)
    ]
    assert [b["id"] for b in batched] == expected
    flat_jvm, flat_py = pair(FlattenBatch())
    back = assert_same(
        flat_jvm.transform(jvm.transform(rows)),
        flat_py.transform(python.transform(rows)),
        ordered=True,
    )
    assert [r["id"] for r in back] == [i for part in _partition_ids(rows) for i in part]


def test_dynamic_batches_hold_the_rows_in_order_whatever_their_ends(spark, rows):
    """Where a dynamic batch ends depends on how fast the rows come, on both backends: each
    batch holds at most maxBatchSize rows, and flattened they are each partition's rows."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "2")  # the Python workers get 2 rows at a time
    try:
        jvm, python = pair(DynamicMiniBatchTransformer(maxBatchSize=3))
        jvm_out, py_out = jvm.transform(rows), python.transform(rows)
        assert jvm_out.schema == py_out.schema
        for out in (jvm_out, py_out):
            batches = out.rdd.glom().collect()
            assert [[i for b in part for i in b["id"]] for part in batches] == _partition_ids(rows)
            assert all(1 <= len(b["id"]) <= 3 for part in batches for b in part)
            assert all(len(set(map(len, b))) == 1 for part in batches for b in part)
        flat_jvm, flat_py = pair(FlattenBatch())
        assert_same(flat_jvm.transform(jvm_out), flat_py.transform(py_out), ordered=True)
    finally:
        spark.conf.set(key, previous)


def _arrow_source(
    n: int, per: int, delay: float = 0.0, fail: bool = False
) -> Iterator[pa.RecordBatch]:
    for start in range(0, n, per):
        if delay:
            time.sleep(delay)
        ids = list(range(start, min(n, start + per)))
        yield pa.RecordBatch.from_arrays([pa.array(ids, pa.int64())], names=["id"])
    if fail:
        raise RuntimeError("the source failed")


def _ids(batches: Iterator[pa.RecordBatch]) -> list[list[int]]:
    return [ids for b in batches for ids in b.column("id").to_pylist()]


def test_dynamic_batching_takes_what_is_ready():
    """The engine's rule, with sources of known speed: rows read while the consumer was busy
    make full batches, a record batch every 150 ms is a batch of its own, and a failure reaches
    the consumer after the rows read before it."""
    batches = dynamic_batches(8, 100, _arrow_source(20, 5))
    first = _ids(iter([next(batches)]))
    time.sleep(0.2)  # the thread reads every other row meanwhile
    rest = _ids(batches)
    assert sum(first + rest, []) == list(range(20))
    left = 20 - sum(map(len, first))
    assert [len(b) for b in rest] == [8] * (left // 8) + ([left % 8] if left % 8 else [])
    slow = _ids(dynamic_batches(1000, 1000, _arrow_source(9, 3, delay=0.15)))
    assert slow == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    got: list[list[int]] = []
    with pytest.raises(RuntimeError, match="the source failed"):
        for batch in dynamic_batches(100, 100, _arrow_source(7, 3, delay=0.01, fail=True)):
            got += batch.column("id").to_pylist()
    assert sum(got, []) == list(range(7))


def test_buffered_batching_closes_a_batch_at_its_deadline():
    """The engine's rule, with a clock of known readings (ns) as each record batch of 3 rows
    comes: batches of 4 rows, closed early by the first record batch 1 s after their first row."""
    readings = iter([0, 10, 5_000_000_000, 5_000_000_001, 9_000_000_000])
    batches = buffered_batches(4, 1000, _arrow_source(15, 3), clock=lambda: next(readings))
    assert _ids(batches) == [[0, 1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11], [12, 13, 14]]


# -- Timer and TimerModel ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def labelled(spark) -> DataFrame:
    species = ["a"] * 6 + ["b"] * 3 + ["c"] + [None, None]
    return spark.createDataFrame(
        list(zip(species, range(12), strict=True)), "species string, id int"
    ).repartition(2)


def _timer_lines(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.name.startswith("mmlspark")]


def test_timer_fits_and_times_as_the_jvm(labelled, caplog):
    jvm, python = pair(Timer(stage=ClassBalancer(inputCol="species")))
    with caplog.at_level(logging.INFO, logger="mmlspark"):
        jvm_model, py_model = jvm.fit(labelled), python.fit(labelled)
    assert isinstance(py_model, TimerModel) and py_model.getBackend() == "python"
    assert py_model.uid == jvm_model.uid == jvm.uid
    inner = py_model.getStage()
    assert isinstance(inner, ClassBalancerModel) and inner.uid == jvm.getStage().uid
    assert py_model.getFitMillis() >= 0 and py_model.getMaterialize() is True
    (fitting,) = _timer_lines(caplog.records)
    assert re.fullmatch(rf"Timer {jvm.uid}: fitting {inner.uid} took \d+ ms", fitting)
    assert py_model.lastTransformMillis() == jvm_model.lastTransformMillis() == -1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mmlspark"):
        py_out = py_model.transform(labelled)
    assert py_out.storageLevel != StorageLevel.NONE  # materialized: cached and counted
    assert py_model.lastTransformMillis() >= 0
    (line,) = _timer_lines(caplog.records)
    assert re.fullmatch(rf"TimerModel {jvm.uid}: transform by {inner.uid} took \d+ ms", line)
    weighted = assert_same(jvm_model.transform(labelled), py_out)
    counts = {"a": 6, "b": 3, "c": 1, None: 2}
    assert {r["species"]: r["weight"] for r in weighted} == {
        k: 12 / (4 * v) for k, v in counts.items()
    }
    py_out.unpersist()
    lazy = py_model.copy().setMaterialize(False)
    assert lazy.transform(labelled).storageLevel == StorageLevel.NONE


class _Doubled(Transformer):
    """A stage written in Python, which no JVM can run."""

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return dataset.withColumn("doubled", F.col("id") * 2)


def test_timer_on_python_runs_any_pyspark_stage(labelled):
    model = Timer().setBackend("python").setStage(_Doubled()).fit(labelled)
    assert model.getFitMillis() >= 0 and isinstance(model.getStage(), _Doubled)
    out = model.transform(labelled).collect()
    assert sorted((r["id"], r["doubled"]) for r in out) == [(i, 2 * i) for i in range(12)]
    sql = Timer(stage=SQLTransformer(statement="SELECT id FROM __THIS__ WHERE id > 8"))
    fitted = sql.setBackend("python").fit(labelled)
    assert sorted(r["id"] for r in fitted.transform(labelled).collect()) == [9, 10, 11]
    # the JVM backend takes JVM-backed stages only
    with pytest.raises(TypeError, match="_Doubled is a stage written in Python, which the JVM"):
        Timer(stage=_Doubled())
    with pytest.raises(TypeError, match=r"on the Python backend \(setBackend\('python'\)\)"):
        TrainClassifier(model=_Doubled())  # which has a Python backend: the message says so
    with pytest.raises(TypeError, match="which the JVM backend cannot run"):
        model.setBackend("jvm")
    assert model.getBackend() == "python" and model._java_obj is None


def test_timer_fails_as_the_jvm(labelled):
    jvm, python = pair(Timer())
    message = assert_fails_alike(lambda: jvm.fit(labelled), lambda: python.fit(labelled))
    assert message == f"Timer {jvm.uid}: param 'stage' must be set"
    jvm, python = pair(TimerModel(stage=ClassBalancer(inputCol="species")))
    message = assert_fails_alike(
        lambda: jvm.transform(labelled), lambda: python.transform(labelled)
    )
    assert message == (
        f"TimerModel {jvm.uid}: param 'stage' must hold a Transformer (a fitted model) but holds "
        "mmlspark.stages.ClassBalancer; fit it first"
    )


# -- ImageSetAugmenter ---------------------------------------------------------------------------

IMAGES: dict[str, np.ndarray | None] = {
    "color": pattern(5, 7, seed=1),
    "gray": pattern(4, 3, 1, seed=2)[..., 0],
    "bgra": np.dstack([pattern(3, 4, seed=3), pattern(3, 4, 1, seed=4)]),
    "deep16": (pattern(3, 5, seed=5).astype(np.uint16) << 8) | 7,
    "float": pattern(2, 3, seed=6).astype(np.float32) / 7 - 5,
    "null": None,
}


@pytest.fixture(scope="module")
def structs(spark) -> DataFrame:
    rows = [(name, image_struct(pixels, f"mem://{name}")) for name, pixels in IMAGES.items()]
    rows += [
        ("short", ("mem://short", 4, 4, 3, 16, bytearray(10))),  # 10 bytes for 4x4x3
        ("f64", image_struct(np.full((2, 2), 0.5), "mem://f64")),  # CV_64F: not an image mode
    ]
    df = spark.createDataFrame(rows, STRUCTS_SCHEMA).repartition(2)
    return df.withColumn("name", F.col("name").alias("name", metadata={"kept": True}))


def _pixels(image: Row) -> np.ndarray:
    depth = {0: np.uint8, 2: np.uint16, 5: np.float32}[image["mode"] & 7]
    shape = (image["height"], image["width"], image["nChannels"])
    return np.frombuffer(bytes(image["data"]), np.dtype(depth).newbyteorder("<")).reshape(shape)


def assert_same_in_order(jvm_df: DataFrame, py_df: DataFrame) -> list[Row]:
    _same_schema(jvm_df, py_df)
    jvm_rows, py_rows = jvm_df.collect(), py_df.collect()
    assert len(jvm_rows) == len(py_rows)
    for i, (e, g) in enumerate(zip(jvm_rows, py_rows, strict=True)):
        for name in jvm_df.columns:
            _same_value(f"{i}:{e['name']}.{name}", e[name], g[name], 0.0)
    return py_rows


@pytest.mark.parametrize(
    "flips",
    [dict(flipUpDown=True), dict(flipLeftRight=False)],
    ids=["both", "none"],
)
def test_image_set_augmenter(structs, flips):
    jvm, python = pair(ImageSetAugmenter(**flips))
    out = assert_same_in_order(jvm.transform(structs), python.transform(structs))
    assert python.transform(structs).schema["name"].metadata == {"kept": True}
    # numpy's flips of each image, in the JVM's order: the image, left-right, up-down
    mirrors = [np.fliplr] if jvm.getFlipLeftRight() else []
    mirrors += [np.flipud] if jvm.getFlipUpDown() else []
    by_name: dict[str, list[Row]] = {}
    for row in out:
        by_name.setdefault(row["name"], []).append(row)
    for name, got in by_name.items():
        pixels = IMAGES.get(name)
        if pixels is None:  # null and malformed images: one row, no image
            assert [r["augmented"] for r in got] == [None]
            continue
        pixels = pixels if pixels.ndim == 3 else pixels[..., None]
        expected = [pixels] + [m(pixels) for m in mirrors]
        assert len(got) == len(expected), name
        for row, want in zip(got, expected, strict=True):
            assert row["augmented"]["origin"] == f"mem://{name}"
            np.testing.assert_array_equal(_pixels(row["augmented"]), want, err_msg=name)
            assert row["image"] == got[0]["image"]  # the other columns repeated


def test_image_set_augmenter_checks_its_columns_as_the_jvm(structs):
    for make in (
        lambda: ImageSetAugmenter(inputCol="name"),
        lambda: ImageSetAugmenter(outputCol="image"),
        lambda: ImageSetAugmenter(inputCol="nope"),
    ):
        jvm, python = pair(make())
        assert_fails_alike(
            lambda j=jvm: j.transform(structs), lambda p=python: p.transform(structs)
        )


# -- UnrollBinaryImage ---------------------------------------------------------------------------

COLOR = pattern(12, 16, seed=11)
FILES: dict[str, bytes | None] = {
    "color.png": encode(COLOR, ".png"),
    "color.jpg": encode(COLOR, ".jpg"),
    "rotated6.jpg": with_exif_orientation(encode(COLOR, ".jpg"), 6),
    "gray.png": encode(pattern(9, 7, 1, seed=12)[..., 0], ".png"),
    "alpha.png": encode(np.dstack([COLOR, pattern(12, 16, 1, seed=13)]), ".png"),
    "deep16.png": encode(pattern(6, 5, seed=14).astype(np.uint16) * 257, ".png"),
    "truncated.jpg": encode(COLOR, ".jpg")[:100],
    "empty.jpg": b"",
    "notes.jpg": b"field notes: camera 7 battery low\n",
    "missing.jpg": None,
}
UNROLL_ERRORS = {
    "truncated.jpg": "truncated JPEG: no end-of-image marker in 100 bytes",
    "empty.jpg": DECODE_ERRORS["empty.jpg"],
    "notes.jpg": DECODE_ERRORS["notes.jpg"],
    "missing.jpg": DECODE_ERRORS["missing.jpg"],
}


@pytest.fixture(scope="module")
def encoded(spark) -> DataFrame:
    rows = [
        (name, f"file:/photos/{name}", None if data is None else bytearray(data))
        for name, data in FILES.items()
    ]
    return spark.createDataFrame(rows, ENCODED_SCHEMA)


def _reference(data: bytes, flags: int, size: tuple[int, int] | None) -> np.ndarray:
    """opencv-python's decode (its EXIF orientation included), resized bilinearly, in CHW."""
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if size is not None:
        pixels = cv2.resize(pixels, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    planes = pixels.reshape(pixels.shape[0], pixels.shape[1], -1)
    return planes.transpose(2, 0, 1).reshape(-1).astype(np.float64)


@pytest.mark.parametrize(
    "params, flags",
    [
        (dict(), cv2.IMREAD_COLOR),
        (dict(colorMode="grayscale", height=3, width=3), cv2.IMREAD_GRAYSCALE),
        (dict(colorMode="unchanged"), cv2.IMREAD_UNCHANGED),
        (dict(minHeight=6, minWidth=6, height=6, width=6, outputCol="v", errorCol="e"), None),
    ],
    ids=["color", "grayscale-resized", "unchanged", "reduced-jpeg-decode"],
)
def test_unroll_binary_image(encoded, params, flags):
    make = lambda: UnrollBinaryImage(**params)  # noqa: E731
    jvm, python = pair(make())
    out, err = jvm.getOutputCol(), jvm.getErrorCol()
    by_name = assert_same_images(
        jvm.transform(encoded),
        python.transform(encoded),
        rows=len(FILES),
        error_col=err,
        output_col=out,
        errors=UNROLL_ERRORS,
    )
    if flags is None:
        return  # a JPEG decoded at 1/2 scale: no opencv-python flag says "at least 6x6"
    size = (params["height"], params["width"]) if "height" in params else None
    for name, row in by_name.items():
        if name not in UNROLL_ERRORS and (flags != cv2.IMREAD_UNCHANGED or "jpg" not in name):
            data = FILES[name]
            assert data is not None
            expected = _reference(data, flags, size)
            np.testing.assert_array_equal(row[out].toArray(), expected, err_msg=name)


def test_unroll_binary_image_checks_as_the_jvm(encoded):
    failures = [
        (lambda: UnrollBinaryImage(height=3), "height and width must both be 0 or both be"),
        (lambda: UnrollBinaryImage(inputCol="name"), "input column 'name' must be"),
        (lambda: UnrollBinaryImage(outputCol="path"), "output column 'path' already exists"),
        (lambda: UnrollBinaryImage(outputCol="e", errorCol="e"), "outputCol and errorCol"),
    ]
    for make, expected in failures:
        jvm, python = pair(make())
        message = assert_fails_alike(
            lambda j=jvm: j.transform(encoded), lambda p=python: p.transform(encoded)
        )
        assert expected in message and message.startswith(f"UnrollBinaryImage {jvm.uid}: ")


# -- a Spark Connect server without the jar -----------------------------------------------------


def _connect_frames(session: Any) -> tuple[DataFrame, DataFrame]:
    files = [(n, None, bytearray(d)) for n, d in FILES.items() if n.endswith(".png")]
    encoded = session.createDataFrame(files, ENCODED_SCHEMA).repartition(1)
    numbers = session.range(0, 10, 1, 2).select("id", (F.col("id") * 1.5).alias("p"))
    return encoded, numbers


def _connect_stages(encoded: DataFrame, numbers: DataFrame) -> list[DataFrame]:
    """What the Connect test runs, on any session: decode, augment, unroll, batch (the dynamic
    batcher, whose read-ahead thread runs in the server's Python workers) and time."""
    decoded = ImageDecoder(inputCol="content").transform(encoded).select("name", "image")
    return [
        ImageSetAugmenter(flipUpDown=True).transform(decoded),
        UnrollBinaryImage(height=4, width=5).transform(encoded),
        DynamicMiniBatchTransformer(maxBatchSize=1).transform(numbers),
        Timer(stage=SelectColumns(cols=["p"])).fit(numbers).transform(numbers),
    ]


def test_on_a_connect_server_without_the_jar(spark, jarless_connect):
    from conftest import connect_mode

    expected = [collected(df) for df in _connect_stages(*_connect_frames(spark))]
    with connect_mode():
        encoded, numbers = _connect_frames(jarless_connect)
        assert ImageSetAugmenter().getBackend() == Timer().getBackend() == "python"
        outputs = _connect_stages(encoded, numbers)
        got = [collected(df) for df in outputs]
        model = Timer(stage=SelectColumns(cols=["p"])).fit(numbers)
        assert model.getBackend() == "python" and model.getFitMillis() >= 0
        model.transform(numbers)
        assert model.lastTransformMillis() >= 0
    for (jvm_fields, jvm_rows), (py_fields, py_rows) in zip(expected, got, strict=True):
        assert py_fields == jvm_fields
        assert repr(py_rows) == repr(jvm_rows)
    # the pixels against opencv-python and numpy: each PNG, then its two mirrors
    augmented = got[0][1]
    names = [n for n in FILES if n.endswith(".png")]
    assert [r["name"] for r in augmented] == [n for n in names for _ in range(3)]
    for i, name in enumerate(names):
        data = FILES[name]
        assert data is not None
        decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        for row, want in zip(
            augmented[3 * i : 3 * i + 3],
            [decoded, np.fliplr(decoded), np.flipud(decoded)],
            strict=True,
        ):
            np.testing.assert_array_equal(_pixels(row["augmented"]), want, err_msg=name)
    for row in got[1][1]:
        data = FILES[row["name"]]
        assert data is not None
        reference = _reference(data, cv2.IMREAD_COLOR, (4, 5))
        np.testing.assert_array_equal(row["unrolled"].toArray(), reference)
