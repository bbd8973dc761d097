"""Behaviour of the utility stages from Python, checked against numpy references.

Tests taking `session` run on a classic and on a Spark Connect session from one body. Classic only,
by design: the Pipeline test with `Timer` and the Timer test, because `Timer.stage` holds a stage,
which a Connect client cannot set (DESIGN, contract 1), and `lastTransformMillis` reads the JVM
stage (ConnectNotSupportedError over Connect, checked in test_connect.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import StringIndexer
from pyspark.ml.linalg import Vectors
from pyspark.sql import functions as F

from mmlspark.stages import (
    BufferedMiniBatchTransformer,
    Cacher,
    ClassBalancer,
    ClassBalancerModel,
    DropColumns,
    EnsembleByKey,
    FlattenBatch,
    MiniBatchTransformer,
    RenameColumn,
    Repartition,
    SelectColumns,
    Timer,
    TimerModel,
)


def _frame(spark):
    rng = np.random.default_rng(7)
    rows = [
        (int(i), f"burst{i % 4}", float(x), Vectors.dense(rng.normal(size=3).tolist()))
        for i, x in enumerate(rng.normal(size=40))
    ]
    return spark.createDataFrame(rows, ["id", "burst", "p", "v"]).repartition(3)


@pytest.fixture
def frame(session):
    return _frame(session)


@pytest.fixture(scope="module")
def classic_frame(spark):
    return _frame(spark)


def _partitions(df) -> int:
    return df.select(F.spark_partition_id().alias("p")).distinct().count()


def _sorted(rows):
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize(
    "make_batcher",
    [
        lambda: MiniBatchTransformer(miniBatchSize=7),
        lambda: BufferedMiniBatchTransformer(miniBatchSize=5),
    ],
    ids=["fixed", "buffered"],
)
def test_minibatch_then_flatten_returns_the_original_rows(frame, make_batcher):
    batcher = make_batcher()
    batched = batcher.transform(frame)
    sizes = [len(r["id"]) for r in batched.collect()]
    assert sum(sizes) == 40 and max(sizes) <= batcher.getMiniBatchSize()
    flat = FlattenBatch().transform(batched)
    assert flat.columns == frame.columns
    assert _sorted(flat.collect()) == _sorted(frame.collect())


def test_ensemble_by_key_matches_numpy(frame):
    out = EnsembleByKey(keys=["burst"], cols=["p", "v"]).transform(frame).collect()
    rows = frame.collect()
    assert len(out) == 4
    for r in out:
        group = [x for x in rows if x["burst"] == r["burst"]]
        np.testing.assert_allclose(r["mean(p)"], np.mean([x["p"] for x in group]), rtol=1e-12)
        np.testing.assert_allclose(
            r["mean(v)"].toArray(), np.mean([x["v"].toArray() for x in group], axis=0), rtol=1e-12
        )


def test_class_balancer_weights_match_numpy(session):
    labels = np.array(["cat"] * 5 + ["dog"] * 2 + ["empty"] * 13)
    df = session.createDataFrame([(str(x),) for x in labels], ["label"])
    model = ClassBalancer().fit(df)
    assert isinstance(model, ClassBalancerModel)
    classes, counts = np.unique(labels, return_counts=True)
    expected = dict(zip(classes, len(labels) / (len(classes) * counts), strict=True))
    out = model.transform(df).collect()
    assert len(out) == len(labels)
    for r in out:
        assert r["weight"] == pytest.approx(expected[r["label"]], rel=1e-12)


def test_column_stages(frame):
    assert SelectColumns(cols=["p", "id"]).transform(frame).columns == ["p", "id"]
    assert DropColumns(cols=["v", "p"]).transform(frame).columns == ["id", "burst"]
    renamed = RenameColumn(inputCol="burst", outputCol="group").transform(frame)
    assert renamed.columns == ["id", "group", "p", "v"]
    assert _partitions(Repartition(n=5).transform(frame)) == 5
    assert _partitions(Repartition(n=5, disable=True).transform(frame)) == 3
    cached = Cacher().transform(frame)
    assert cached.storageLevel.useMemory
    cached.unpersist()


def test_pipeline_of_utility_stages_saves_and_loads(classic_frame, tmp_path):
    frame = classic_frame
    pipeline = Pipeline(
        stages=[
            StringIndexer(inputCol="burst", outputCol="burstIndex"),
            ClassBalancer(inputCol="burst"),
            MiniBatchTransformer(miniBatchSize=8),
            FlattenBatch(),
            Timer(stage=SelectColumns(cols=["id", "burstIndex", "weight"])),
        ]
    )
    model = pipeline.fit(frame)
    expected = _sorted(model.transform(frame).collect())
    assert [r["weight"] for r in expected] == pytest.approx([1.0] * 40)
    pipeline.save(str(tmp_path / "pipeline"))
    model.save(str(tmp_path / "model"))
    loaded_pipeline = Pipeline.load(str(tmp_path / "pipeline"))
    assert [type(s) for s in loaded_pipeline.getStages()] == [type(s) for s in pipeline.getStages()]
    loaded = PipelineModel.load(str(tmp_path / "model"))
    assert [type(s).__name__ for s in loaded.stages] == [
        "StringIndexerModel",
        "ClassBalancerModel",
        "MiniBatchTransformer",
        "FlattenBatch",
        "TimerModel",
    ]
    timer = loaded.stages[-1]
    assert isinstance(timer, TimerModel)
    assert isinstance(timer.getStage(), SelectColumns)
    assert timer.getStage().getCols() == ["id", "burstIndex", "weight"]
    assert _sorted(loaded.transform(frame).collect()) == expected


def test_timer_reports_fit_and_transform_times(classic_frame):
    frame = classic_frame
    model = Timer(stage=ClassBalancer(inputCol="burst")).fit(frame)
    assert isinstance(model, TimerModel)
    assert isinstance(model.getStage(), ClassBalancerModel)
    assert model.getFitMillis() >= 0
    assert model.lastTransformMillis() == -1
    assert model.transform(frame).count() == 40
    assert model.lastTransformMillis() >= 0
