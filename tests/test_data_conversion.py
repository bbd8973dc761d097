"""DataConversion, StratifiedRepartition, PartitionConsolidator and the layout of
``spark.read.image()``: each on both backends against pandas, hand-worked counts or Spark's own
image source; save/load and a Pipeline round trip; misuse fails alike on both backends."""

from __future__ import annotations

import math
from collections import Counter

import cv2
import numpy as np
import pandas as pd
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import IndexToString, StringIndexer
from pyspark.sql import functions as F
from test_python_stages import assert_fails_alike, assert_same, pair

from mmlspark.featurize import DataConversion
from mmlspark.stages import PartitionConsolidator, StratifiedRepartition

NAN = float("nan")
S = ["1", "abc", None, "300", "-7"]
D = [1.7, -2.2, NAN, None, 300.0]
INTS = [0, 200, -3, None, 1]
SPECIES = ["fox", "deer", None, "fox", "boar"]
WHEN = ["2024-03-01 12:30:45", "1999-12-31 23:59:59", "nope", None, "2024-02-29 00:00:00"]
MILLIS = [0, 1_700_000_000_123, None, -86_400_000, 951_782_400_000]


@pytest.fixture(scope="module")
def table(spark):
    rows = list(zip(range(5), S, D, INTS, SPECIES, WHEN, MILLIS, strict=True))
    schema = "id int, s string, d double, i int, sp string, w string, ms long"
    return spark.createDataFrame(rows, schema)


def _column(df, name):
    return [r[name] for r in df.orderBy("id").collect()]


def _none(values):
    """pandas' missing values (NaN, NaT, pd.NA) as None, the others as Python values."""
    return [None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in values]


# -- DataConversion --------------------------------------------------------------------------------


def test_casts_agree_with_pandas_on_both_backends(table):
    def both(cols, to):
        jvm, python = pair(DataConversion(cols=cols, convertTo=to))
        return assert_same(jvm.transform(table), python.transform(table), key=lambda r: r["id"])

    # text to numbers: what pandas' to_numeric reads, null where it reads none
    out = both(["s"], "double")
    assert [r["s"] for r in out] == _none(pd.to_numeric(pd.Series(S), errors="coerce"))
    out = both(["s"], "integer")
    assert [r["s"] for r in out] == _none(pd.to_numeric(pd.Series(S), errors="coerce"))
    # doubles to ints truncate toward zero, as numpy's astype; NaN and null give null
    out = both(["d"], "long")
    want = [None if v is None or math.isnan(v) else int(np.trunc(v)) for v in D]
    assert [r["d"] for r in out] == want
    # a value the type cannot hold is null (200 is no byte), not wrapped around
    out = both(["i"], "byte")
    info = np.iinfo(np.int8)
    assert [r["i"] for r in out] == [
        v if v is None or info.min <= v <= info.max else None for v in INTS
    ]
    out = both(["i", "d"], "string")
    assert [r["i"] for r in out] == [None if v is None else str(v) for v in INTS]
    assert [r["d"] for r in out] == [
        None if v is None else ("NaN" if math.isnan(v) else str(v)) for v in D
    ]
    out = both(["i"], "boolean")
    assert [r["i"] for r in out] == [None if v is None else bool(v) for v in INTS]


def test_dates_read_text_and_epoch_milliseconds_as_pandas_does(spark, table):
    zone = spark.conf.get("spark.sql.session.timeZone")
    stage = DataConversion(cols=["w", "ms"], convertTo="date")
    jvm, python = pair(stage)
    dated = assert_same(jvm.transform(table), python.transform(table), key=lambda r: r["id"])
    assert {type(r["w"]).__name__ for r in dated if r["w"] is not None} == {"datetime"}
    # back to epoch milliseconds (long) and to text in another pattern, on both backends
    dates = jvm.transform(table)
    jvm_long, py_long = pair(DataConversion(cols=["w"], convertTo="long"))
    longs = assert_same(jvm_long.transform(dates), py_long.transform(dates), key=lambda r: r["id"])
    parsed = pd.to_datetime(pd.Series(WHEN), format="%Y-%m-%d %H:%M:%S", errors="coerce")
    want = [None if pd.isna(t) else t.tz_localize(zone).value // 10**6 for t in parsed]
    assert [r["w"] for r in sorted(longs, key=lambda r: r["id"])] == want
    text = DataConversion(cols=["ms"], convertTo="string", dateTimeFormat="yyyy/MM/dd HH:mm")
    jvm_text, py_text = pair(text)
    texts = assert_same(jvm_text.transform(dates), py_text.transform(dates), key=lambda r: r["id"])
    stamps = pd.to_datetime(pd.Series(MILLIS, dtype="Int64"), unit="ms", utc=True)
    want = [None if pd.isna(t) else t.tz_convert(zone).strftime("%Y/%m/%d %H:%M") for t in stamps]
    assert [r["ms"] for r in sorted(texts, key=lambda r: r["id"])] == want


def test_to_categorical_and_back_with_the_value_indexer_metadata(spark, table):
    jvm, python = pair(DataConversion(cols=["sp"], convertTo="toCategorical"))
    indexed = assert_same(jvm.transform(table), python.transform(table), key=lambda r: r["id"])
    levels = sorted({v for v in SPECIES if v is not None})  # boar, deer, fox; null after them
    want = [len(levels) if v is None else levels.index(v) for v in SPECIES]
    assert [r["sp"] for r in sorted(indexed, key=lambda r: r["id"])] == want
    cat = jvm.transform(table)
    assert cat.columns == table.columns  # in place
    assert cat.schema["sp"].metadata["ml_attr"]["vals"] == levels
    named = IndexToString(inputCol="sp", outputCol="name").transform(cat.where("sp < 3"))
    assert sorted(r["name"] for r in named.collect()) == sorted(v for v in SPECIES if v)
    jvm_back, py_back = pair(DataConversion(cols=["sp"], convertTo="clearCategorical"))
    back = assert_same(jvm_back.transform(cat), py_back.transform(cat), key=lambda r: r["id"])
    assert [r["sp"] for r in sorted(back, key=lambda r: r["id"])] == SPECIES
    assert jvm_back.transform(cat).schema == table.schema
    # Spark's StringIndexer writes the levels too (with "keep", its "__unknown" for the null):
    # clearCategorical reads them as Spark's IndexToString does
    strings = StringIndexer(inputCol="s", outputCol="si", handleInvalid="keep").fit(table)
    si = strings.transform(table).drop("s")
    cleared = DataConversion(cols=["si"], convertTo="clearCategorical").transform(si)
    assert _column(cleared, "si") == [v if v is not None else "__unknown" for v in S]
    spark_names = IndexToString(inputCol="si", outputCol="name").transform(si)
    assert _column(cleared, "si") == _column(spark_names, "name")


def test_data_conversion_misuse_fails_alike(spark, table):
    cases = [
        (dict(convertTo="double"), "param 'cols' must be set"),
        (dict(cols=["s"]), "param 'convertTo' must be set"),
        (dict(cols=["nope"], convertTo="double"), "'nope' does not exist"),
        (
            dict(cols=["d"], convertTo="date"),
            "convertTo 'date' takes a string or long column, but column 'd' is double",
        ),
        (dict(cols=["i"], convertTo="clearCategorical"), "column 'i' carries no levels"),
    ]
    for params, fragment in cases:
        jvm, python = pair(DataConversion(**params))
        message = assert_fails_alike(
            lambda j=jvm: j.transform(table), lambda p=python: p.transform(table)
        )
        assert fragment in message and jvm.uid in message
    dated = DataConversion(cols=["w"], convertTo="date").transform(table)
    jvm, python = pair(DataConversion(cols=["w"], convertTo="double"))
    message = assert_fails_alike(lambda: jvm.transform(dated), lambda: python.transform(dated))
    assert "a timestamp converts to long or string" in message and "'w' is timestamp" in message
    nested = spark.createDataFrame([([1],)], "arr array<int>")
    jvm, python = pair(DataConversion(cols=["arr"], convertTo="toCategorical"))
    message = assert_fails_alike(lambda: jvm.transform(nested), lambda: python.transform(nested))
    assert "a string, boolean or numeric type, but column 'arr' is array<int>" in message
    for backend in ("jvm", "python"):
        with pytest.raises(Exception, match="convertTo"):
            DataConversion().setBackend(backend).setConvertTo("int")
        with pytest.raises(Exception, match="cols"):
            DataConversion().setBackend(backend).setCols([])


# -- StratifiedRepartition -------------------------------------------------------------------------

LABELS = [0] * 20 + [1] * 5 + [2] * 2


@pytest.fixture(scope="module")
def labelled(spark):
    rows = [(i, label) for i, label in enumerate(LABELS)]
    return spark.createDataFrame(rows, "id int, label int").repartition(4)


def _by_partition(df):
    rows = df.select("id", "label", F.spark_partition_id().alias("p")).collect()
    return rows, {
        p: Counter(r["label"] for r in rows if r["p"] == p) for p in {r["p"] for r in rows}
    }


@pytest.mark.parametrize(
    "mode, per_label", [("equal", {0: 20, 1: 20, 2: 20}), ("mixed", {0: 20, 1: 13, 2: 11})]
)
def test_stratified_repartition_puts_every_label_in_every_partition(labelled, mode, per_label):
    # hand-worked: equal repeats every label up to the largest count (20); mixed goes halfway,
    # ceil((5 + 20) / 2) = 13 and ceil((2 + 20) / 2) = 11
    jvm, python = pair(StratifiedRepartition(labelCol="label", mode=mode, seed=7))
    rows, parts = _by_partition(jvm.transform(labelled))
    py_rows, py_parts = _by_partition(python.transform(labelled))
    assert sorted(rows) == sorted(py_rows) and parts == py_parts  # same rows, same partitions
    assert len(parts) == 4 and all(set(c) == {0, 1, 2} for c in parts.values())
    assert sum(parts.values(), Counter()) == Counter(per_label)
    # each row of a label is repeated in turn: target // n or one time more
    copies = Counter(r["id"] for r in rows)
    reference = pd.Series(LABELS).value_counts()
    for i, label in enumerate(LABELS):
        low = per_label[label] // reference[label]
        assert copies[i] in (low, low + 1)


def test_stratified_repartition_original_keeps_every_row_once(labelled):
    jvm, python = pair(StratifiedRepartition(labelCol="label", mode="original"))
    rows, parts = _by_partition(jvm.transform(labelled))
    assert sorted(r["id"] for r in rows) == list(range(len(LABELS)))
    assert _by_partition(python.transform(labelled))[1] == parts
    assert all({0, 1} <= set(c) for c in parts.values())  # labels with at least 4 rows
    assert sum(2 in c for c in parts.values()) == 2  # label 2's two rows: two partitions


def test_stratified_repartition_misuse(labelled):
    jvm, python = pair(StratifiedRepartition(labelCol="nope"))
    assert "'nope' does not exist" in assert_fails_alike(
        lambda: jvm.transform(labelled), lambda: python.transform(labelled)
    )
    for backend in ("jvm", "python"):
        with pytest.raises(Exception, match="mode"):
            StratifiedRepartition().setBackend(backend).setMode("balanced")


# -- PartitionConsolidator -------------------------------------------------------------------------


def test_partition_consolidator_keeps_rows_in_one_partition_per_executor(spark):
    df = spark.range(0, 3000, numPartitions=4)
    jvm, python = pair(PartitionConsolidator(gracePeriodMillis=300))
    for stage in (jvm, python):
        out = stage.transform(df).select("id", F.spark_partition_id().alias("p")).collect()
        assert sorted(r["id"] for r in out) == list(range(3000))  # every row, once
        assert len({r["p"] for r in out}) == 1  # local mode: one executor, one stream
    assert PartitionConsolidator().getGracePeriodMillis() == 1000


def test_a_pipeline_of_the_new_stages_saves_and_loads(labelled, tmp_path):
    pipeline = Pipeline(
        stages=[
            DataConversion(cols=["label"], convertTo="string"),
            StratifiedRepartition(labelCol="label", mode="equal", seed=3),
            PartitionConsolidator(gracePeriodMillis=100),
            DataConversion(cols=["label"], convertTo="toCategorical"),
        ]
    )
    model = pipeline.fit(labelled)
    model.write().save(str(tmp_path / "p"))
    loaded = PipelineModel.load(str(tmp_path / "p"))
    assert [s.uid for s in loaded.stages] == [s.uid for s in model.stages]
    out = loaded.transform(labelled)
    assert Counter(r["label"] for r in out.collect()) == Counter({0: 20, 1: 20, 2: 20})
    assert out.schema["label"].metadata["ml_attr"]["vals"] == ["0", "1", "2"]
    consolidator = loaded.stages[2]
    assert isinstance(consolidator, PartitionConsolidator)
    assert consolidator.getGracePeriodMillis() == 100


# -- spark.read.image(): Spark's image source layout -----------------------------------------------


def test_read_image_has_the_image_source_layout(spark, tmp_path):
    import mmlspark.io  # noqa: F401

    rng = np.random.default_rng(5)
    folder = tmp_path / "imgs"
    folder.mkdir()
    smooth = cv2.GaussianBlur(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), (7, 7), 3)
    files = {
        "a.png": rng.integers(0, 256, (9, 7, 3), dtype=np.uint8),
        "b.png": smooth,
        "c.jpg": smooth,
    }
    for name, bgr in files.items():
        cv2.imwrite(str(folder / name), bgr)
    ours = spark.read.image().load(str(folder))
    theirs = spark.read.format("image").load(str(folder))
    assert ours.columns[0] == theirs.columns[0] == "image"
    assert [(f.name, f.dataType) for f in ours.schema["image"].dataType.fields] == [
        (f.name, f.dataType) for f in theirs.schema["image"].dataType.fields
    ]

    def by_name(rows):
        return {r[0]["origin"].rsplit("/", 1)[-1]: r[0] for r in rows}

    got, spark_rows = by_name(ours.collect()), by_name(theirs.collect())
    assert set(got) == set(spark_rows) == set(files)
    for name, image in got.items():
        want = spark_rows[name]
        assert [image[k] for k in ("height", "width", "nChannels", "mode")] == [
            want[k] for k in ("height", "width", "nChannels", "mode")
        ]
        a = np.frombuffer(image["data"], np.uint8).astype(int)
        b = np.frombuffer(want["data"], np.uint8).astype(int)
        # PNG decodes exactly; two JPEG decoders may differ by a level
        assert np.abs(a - b).max() <= (0 if name.endswith(".png") else 2)
        if name.endswith(".png"):
            assert (a.reshape(files[name].shape) == files[name]).all()
    row = ours.where(F.col("image.origin").endswith("a.png")).first()
    assert row[0] == row.image and row.image.height == 9
