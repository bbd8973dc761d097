"""Behaviour of the utility stages from Python, checked against numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import StringIndexer
from pyspark.ml.linalg import Vectors

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


@pytest.fixture(scope="module")
def frame(spark):
    rng = np.random.default_rng(7)
    rows = [
        (int(i), f"burst{i % 4}", float(x), Vectors.dense(rng.normal(size=3).tolist()))
        for i, x in enumerate(rng.normal(size=40))
    ]
    return spark.createDataFrame(rows, ["id", "burst", "p", "v"]).repartition(3)


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
def test_minibatch_then_flatten_returns_the_original_rows(spark, frame, make_batcher):
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


def test_class_balancer_weights_match_numpy(spark):
    labels = np.array(["cat"] * 5 + ["dog"] * 2 + ["empty"] * 13)
    df = spark.createDataFrame([(str(x),) for x in labels], ["label"])
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
    assert Repartition(n=5).transform(frame).rdd.getNumPartitions() == 5
    assert Repartition(n=5, disable=True).transform(frame).rdd.getNumPartitions() == 3
    assert Cacher().transform(frame).storageLevel.useMemory


def test_pipeline_of_utility_stages_saves_and_loads(spark, frame, tmp_path):
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


def test_timer_reports_fit_and_transform_times(frame):
    model = Timer(stage=ClassBalancer(inputCol="burst")).fit(frame)
    assert isinstance(model, TimerModel)
    assert isinstance(model.getStage(), ClassBalancerModel)
    assert model.getFitMillis() >= 0
    assert model.lastTransformMillis() == -1
    assert model.transform(frame).count() == 40
    assert model.lastTransformMillis() >= 0
