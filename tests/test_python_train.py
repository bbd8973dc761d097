"""The Python backend of the training and evaluation stages against their JVM stages.

Each case fits or runs a stage on the JVM and a copy of it (same uid, same params) on the Python
backend, whose featurization and learner are pyspark's own stages, and compares the outputs:
fields (names, types, metadata) and rows. The metrics are also checked against scikit-learn on
the same predictions. The last tests run on a Spark Connect server without the jar.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from metrics_reference import assert_classification_metrics
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.regression import LinearRegression
from pyspark.sql import DataFrame
from sklearn import metrics
from test_python_stages import assert_fails_alike, assert_same, collected, pair

import mmlspark
from mmlspark.automl import BestModel, FindBestModel
from mmlspark.train import (
    ComputeModelStatistics,
    ComputePerInstanceStatistics,
    TrainClassifier,
    TrainedClassifierModel,
    TrainedRegressorModel,
    TrainRegressor,
)

SCHEMA = (
    "id int, age double, plan string, member boolean, visits array<double>, note string, "
    "churn string, species string, spend double"
)
WORDS = ["late", "bill", "app", "slow", "great", "support", "price", "fast", "crash", "refund"]


def _rows(n: int, seed: int) -> list[tuple[Any, ...]]:
    """Customers with a numeric (some null), a categorical, a boolean, an array and a free-text
    column; a binary label (churn), a three-class one (species) and a numeric one (spend)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        age = float(rng.integers(18, 80))
        plan = ["basic", "pro", "team"][int(rng.integers(0, 3))]
        member = bool(rng.integers(0, 2))
        visits = [float(rng.poisson(3)), float(rng.poisson(1))]
        note = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 7))))
        score = 0.08 * (age - 45) + (1.5 if plan == "basic" else 0) - (1.2 if member else 0)
        churn = "yes" if score + rng.normal(0, 0.7) > 0 else "no"
        species = ["cat", "deer", "empty"][int(np.argmax([age / 30, visits[0] / 2, 1.5]))]
        spend = 2.0 * age + (30 if plan == "pro" else 0) + float(rng.normal(0, 5))
        rows.append(
            (
                i,
                None if i % 17 == 0 else age,
                None if i % 29 == 0 else plan,
                member,
                visits,
                note,
                churn,
                species,
                spend,
            )
        )
    return rows


@pytest.fixture(scope="module")
def data(spark):
    train = spark.createDataFrame(_rows(160, 1), SCHEMA).cache()
    test = spark.createDataFrame(_rows(80, 2), SCHEMA).cache()
    return train, test


def _classifier(label: str, **params: Any) -> TrainClassifier:
    inputs = ["age", "plan", "member", "visits", "note"]
    return TrainClassifier(
        model=LogisticRegression(maxIter=8),
        **{"labelCol": label, "inputCols": inputs, "numFeatures": 32, **params},
    )


def _fitted_pair(jvm: Any, python: Any, train: DataFrame) -> tuple[Any, Any]:
    jvm_model, py_model = jvm.fit(train), python.fit(train)
    assert jvm_model.getBackend() == "jvm" and py_model.getBackend() == "python"
    assert py_model.uid == jvm_model.uid == jvm.uid
    return jvm_model, py_model


# ---------------------------------------------------------------------------------------------
# TrainClassifier, TrainedClassifierModel, ComputeModelStatistics, ComputePerInstanceStatistics


def _fitted_classifiers(label: str, data: Any) -> tuple[Any, ...]:
    train, test = data
    jvm, python = pair(_classifier(label))
    jvm_model, py_model = _fitted_pair(jvm, python, train)
    return label, jvm_model, py_model, jvm_model.transform(test), py_model.transform(test)


@pytest.fixture(scope="module")
def binary(data):
    """A binary classifier (churn) fitted on both backends, and their outputs on the test rows."""
    return _fitted_classifiers("churn", data)


@pytest.fixture(scope="module", params=["churn", "species"])
def classified(request, data):
    """The binary classifier, and a three-class one (species)."""
    if request.param == "churn":
        return request.getfixturevalue("binary")
    return _fitted_classifiers(request.param, data)


def test_the_fitted_classifiers_agree(classified):
    label, jvm_model, py_model, jvm_out, py_out = classified
    for name in ("levels", "labelType", "inputCols", "textCols", "categoricalCols", "labelCol"):
        assert py_model.getOrDefault(name) == jvm_model.getOrDefault(name), name
    assert py_model.getTextCols() == ["note"] and py_model.getCategoricalCols() == ["plan"]
    expected = ["no", "yes"] if label == "churn" else ["cat", "deer", "empty"]
    assert py_model.getLevels() == expected
    rows = assert_same(jvm_out, py_out, key=lambda r: r.id, exact=False)
    assert {r.prediction for r in rows} <= set(expected)
    assert py_out.columns[-3:] == ["rawPrediction", "probability", "prediction"]


def test_a_jvm_fitted_classifier_scores_alike_on_python(classified, data):
    _, jvm_model, _, jvm_out, _ = classified
    _, python = pair(jvm_model)
    assert_same(jvm_out, python.transform(data[1]), key=lambda r: r.id)


def test_model_statistics_agree_and_match_scikit_learn(classified):
    label, _, _, jvm_out, py_out = classified
    jvm_stats, py_stats = pair(ComputeModelStatistics())
    got = assert_same(jvm_stats.transform(jvm_out), py_stats.transform(py_out), exact=False)[0]
    rows = py_out.select(label, "prediction", "probability").collect()
    truth, predicted = [r[label] for r in rows], [r.prediction for r in rows]
    levels = sorted(set(truth) | set(predicted))
    assert_classification_metrics(got, truth, predicted, levels)
    if label == "churn":
        scores = [r.probability[1] for r in rows]
        assert got.AUC == pytest.approx(metrics.roc_auc_score(truth, scores), abs=1e-12)
        evaluator = BinaryClassificationEvaluator(rawPredictionCol="probability", numBins=0)
        spark_auc = evaluator.evaluate(
            py_out.selectExpr("probability", "DOUBLE(churn = 'yes') AS label")
        )
        assert got.AUC == pytest.approx(spark_auc, abs=1e-12)
    else:
        assert got.AUC is None


def test_per_instance_log_loss_agrees_and_matches_scikit_learn(classified):
    label, jvm_model, _, jvm_out, py_out = classified
    jvm_stats, py_stats = pair(ComputePerInstanceStatistics())
    rows = assert_same(
        jvm_stats.transform(jvm_out), py_stats.transform(py_out), key=lambda r: r.id, exact=False
    )
    levels = jvm_model.getLevels()
    for r in rows:
        expected = metrics.log_loss([r[label]], [r.probability.toArray()], labels=levels)
        assert r.log_loss == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# TrainRegressor, TrainedRegressorModel


@pytest.fixture(scope="module")
def regressed(data):
    train, test = data
    jvm, python = pair(
        TrainRegressor(
            model=LinearRegression(maxIter=8), labelCol="spend", featuresCol="f", numFeatures=32
        )
    )
    jvm_model, py_model = _fitted_pair(jvm, python, train.drop("churn", "species"))
    test = test.drop("churn", "species")
    return jvm_model, py_model, jvm_model.transform(test), py_model.transform(test)


def test_regression_agrees_and_matches_scikit_learn(regressed):
    jvm_model, py_model, jvm_out, py_out = regressed
    assert py_model.getInputCols() == jvm_model.getInputCols()
    assert py_model.getTextCols() == jvm_model.getTextCols() == ["note"]
    rows = assert_same(jvm_out, py_out, key=lambda r: r.id, exact=False)
    assert "f" in py_out.columns
    jvm_stats, py_stats = pair(ComputeModelStatistics())
    got = assert_same(jvm_stats.transform(jvm_out), py_stats.transform(py_out), exact=False)[0]
    truth = np.array([r.spend for r in rows])
    predicted = np.array([r.prediction for r in rows])
    assert got.mean_squared_error == pytest.approx(metrics.mean_squared_error(truth, predicted))
    assert got.root_mean_squared_error == pytest.approx(
        math.sqrt(metrics.mean_squared_error(truth, predicted))
    )
    assert got.r2 == pytest.approx(metrics.r2_score(truth, predicted), rel=1e-12)
    assert got.mean_absolute_error == pytest.approx(metrics.mean_absolute_error(truth, predicted))
    assert got.r2 > 0.9
    jvm_losses, py_losses = pair(ComputePerInstanceStatistics())
    losses = assert_same(
        jvm_losses.transform(jvm_out), py_losses.transform(py_out), key=lambda r: r.id, exact=False
    )
    np.testing.assert_allclose([r.L2_loss for r in losses], (truth - predicted) ** 2, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# FindBestModel, BestModel


def test_find_best_model_chooses_alike_and_saves_across_backends(data, tmp_path):
    train, test = data
    weak = _classifier("churn", inputCols=["visits"]).fit(train)
    strong = _classifier("churn").fit(train)
    jvm, python = pair(FindBestModel(models=[weak, strong], evaluationMetric="AUC"))
    jvm_best, py_best = _fitted_pair(jvm, python, test)
    assert py_best.getBestModel().uid == jvm_best.getBestModel().uid == strong.uid
    key = lambda r: r.model_uid  # noqa: E731
    assert_same(jvm_best.getAllModelMetrics(), py_best.getAllModelMetrics(), key=key, exact=False)
    assert_same(jvm_best.getBestModelMetrics(), py_best.getBestModelMetrics(), exact=False)
    assert_same(jvm_best.getRocCurve(), py_best.getRocCurve(), ordered=True, exact=False)
    scored = strong.transform(test).select("churn", "probability").collect()
    truth, scores = [r.churn for r in scored], [r.probability[1] for r in scored]
    fpr, tpr, _ = metrics.roc_curve(truth, scores, pos_label="yes", drop_intermediate=False)
    curve = [(r.false_positive_rate, r.true_positive_rate) for r in py_best.getRocCurve().collect()]
    # Spark's curve: scikit-learn's (a point per distinct score from (0, 0)), then (1, 1) again
    expected = [*zip(fpr, tpr, strict=True), (1.0, 1.0)]
    np.testing.assert_allclose(curve, expected, atol=1e-12)
    table = {r.model_uid: r for r in py_best.getAllModelMetrics().collect()}
    assert table[strong.uid].AUC == pytest.approx(metrics.roc_auc_score(truth, scores), abs=1e-12)
    assert table[strong.uid].AUC > table[weak.uid].AUC
    assert table[strong.uid].model_class == "mmlspark.train.TrainedClassifierModel"
    assert_same(jvm_best.transform(test), py_best.transform(test), key=lambda r: r.id)
    best = py_best
    best.write().save(str(tmp_path / "best"))
    assert (tmp_path / "best" / "params" / "bestModel" / "metadata").is_dir()
    on_jvm = BestModel.load(str(tmp_path / "best"))
    on_python = _load_on_python(BestModel, str(tmp_path / "best"))
    by_uid = lambda r: r.model_uid  # noqa: E731
    # Parquet reads every array back as one that may hold nulls, on either backend.
    assert_same(on_jvm.getAllModelMetrics(), on_python.getAllModelMetrics(), key=by_uid)
    metrics_rows = collected(best.getAllModelMetrics())[1]
    assert sorted(on_python.getAllModelMetrics().collect(), key=by_uid) == sorted(
        metrics_rows, key=by_uid
    )
    assert_same(best.getRocCurve(), on_python.getRocCurve(), ordered=True)
    # The JVM's BestModel reads the curve's rows in the order Spark lists its files.
    assert sorted(on_jvm.getRocCurve().collect()) == best.getRocCurve().collect()
    for loaded in (on_jvm, on_python):
        assert loaded.getBestModel().uid == best.getBestModel().uid
        assert loaded.getBestModelMetrics().first().model_uid == best.getBestModel().uid
        assert_same(best.transform(test), loaded.transform(test), key=lambda r: r.id)


# ---------------------------------------------------------------------------------------------
# Saving and loading: one format for both backends


def _load_on_python(cls: Any, path: str) -> Any:
    mmlspark.set_backend("python")
    try:
        loaded = cls.load(path)
    finally:
        mmlspark.set_backend(None)
    assert loaded.getBackend() == "python"
    return loaded


def test_trained_models_save_and_load_across_backends(binary, regressed, data, tmp_path):
    _, jvm_model, py_model, jvm_out, py_out = binary
    test = data[1]
    py_model.write().save(str(tmp_path / "py"))
    assert (tmp_path / "py" / "params" / "model" / "metadata").is_dir()
    assert (tmp_path / "py" / "params" / "featurization" / "stages").is_dir()
    with pytest.raises(FileExistsError):
        py_model.write().save(str(tmp_path / "py"))
    on_python = _load_on_python(TrainedClassifierModel, str(tmp_path / "py"))
    on_jvm = TrainedClassifierModel.load(str(tmp_path / "py"))
    assert on_jvm.getBackend() == "jvm"
    for loaded in (on_python, on_jvm):
        assert loaded.uid == py_model.uid and loaded.getLevels() == py_model.getLevels()
        assert_same(py_out, loaded.transform(test), key=lambda r: r.id)
    jvm_model.write().save(str(tmp_path / "jvm"))
    from_jvm = _load_on_python(TrainedClassifierModel, str(tmp_path / "jvm"))
    assert_same(jvm_out, from_jvm.transform(test), key=lambda r: r.id)

    _, py_regressor, _, py_scored = regressed
    py_regressor.write().save(str(tmp_path / "regressor"))
    on_jvm = TrainedRegressorModel.load(str(tmp_path / "regressor"))
    test = test.drop("churn", "species")
    assert_same(py_scored, on_jvm.transform(test), key=lambda r: r.id)
    on_python = _load_on_python(TrainedRegressorModel, str(tmp_path / "regressor"))
    assert_same(py_scored, on_python.transform(test), key=lambda r: r.id)


# ---------------------------------------------------------------------------------------------
# Failures: the JVM stage's checks, with its messages


FIT, RUN = "fit", "transform"
LR, LinR = LogisticRegression, LinearRegression
FAILURES = [
    ("no-model", lambda: TrainClassifier(labelCol="churn"), FIT, None),
    ("not-a-classifier", lambda: TrainClassifier(model=LinR(), labelCol="churn"), FIT, None),
    ("no-label", lambda: _classifier("nope"), FIT, None),
    ("string-not-reindexed", lambda: _classifier("churn", reindexLabel=False), FIT, None),
    ("label-not-listed", lambda: _classifier("churn", labels=["no"]), FIT, None),
    ("fractional-class", lambda: _classifier("spend", reindexLabel=False), FIT, None),
    ("text-not-string", lambda: _classifier("churn", textCols=["age"]), FIT, None),
    (
        "text-and-category",
        lambda: _classifier("churn", textCols=["plan"], categoricalCols=["plan"]),
        FIT,
        None,
    ),
    (
        "map-column",
        lambda: _classifier("churn", inputCols=["m"]),
        FIT,
        lambda df: df.selectExpr("map('a', age) AS m", "churn"),
    ),
    ("no-rows", lambda: _classifier("churn"), FIT, lambda df: df.limit(0)),
    ("not-a-regressor", lambda: TrainRegressor(model=LR(), labelCol="spend"), FIT, None),
    ("string-regression-label", lambda: TrainRegressor(model=LinR(), labelCol="plan"), FIT, None),
    (
        "regression-of-strings",
        lambda: ComputeModelStatistics(evaluationMetric="regression"),
        RUN,
        lambda df: df.selectExpr("churn AS label", "plan AS prediction"),
    ),
    (
        "no-prediction",
        lambda: ComputeModelStatistics(),
        RUN,
        lambda df: df.selectExpr("churn AS label"),
    ),
    (
        "no-probabilities",
        lambda: ComputePerInstanceStatistics(labelCol="churn", predictionCol="plan"),
        RUN,
        None,
    ),
    ("unfitted-candidate", lambda: FindBestModel(models=[LR()]), FIT, None),
]


@pytest.mark.parametrize(
    "make, method, shape", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_failures_are_the_jvm_stages(data, make, method, shape):
    df = shape(data[0]) if shape else data[0]
    jvm, python = pair(make())
    message = assert_fails_alike(
        lambda: getattr(jvm, method)(df), lambda: getattr(python, method)(df)
    )
    assert message.startswith(f"{type(jvm).__name__} {jvm.uid}: ")


# ---------------------------------------------------------------------------------------------
# A Spark Connect server without the jar


def test_on_a_connect_server_without_the_jar(spark, jarless_connect, tmp_path):
    """TrainClassifier, its model, both statistics stages and FindBestModel run on the Python
    backend over Connect, with pyspark's learners on the server, as the JVM runs them."""
    from conftest import connect_mode

    from mmlspark.core.backend import backend_decision

    def frames(session: Any) -> tuple[DataFrame, DataFrame]:
        # One partition each, in order, so the learner adds up as on the classic session.
        return tuple(  # type: ignore[return-value]
            session.createDataFrame(_rows(n, seed), SCHEMA).coalesce(1)
            for n, seed in ((160, 1), (80, 2))
        )

    train, test = frames(spark)
    jvm_model = _classifier("churn").fit(train)
    jvm_scored = jvm_model.transform(test)
    expected = [
        collected(jvm_scored),
        collected(ComputeModelStatistics().transform(jvm_scored)),
        collected(ComputePerInstanceStatistics().transform(jvm_scored)),
    ]
    with connect_mode():
        assert backend_decision(jarless_connect).backend == "python"
        train, test = frames(jarless_connect)
        model = _classifier("churn").fit(train)
        assert model.getBackend() == "python" and model.getLevels() == jvm_model.getLevels()
        scored = model.transform(test)
        by_id = lambda r: r.id  # noqa: E731
        assert_same(expected[0], scored, key=by_id, exact=False)
        assert_same(expected[1], ComputeModelStatistics().transform(scored), exact=False)
        losses = ComputePerInstanceStatistics().transform(scored)
        assert_same(expected[2], losses, key=by_id, exact=False)
        weak = _classifier("churn", inputCols=["visits"]).fit(train)
        best = FindBestModel(models=[weak, model], evaluationMetric="AUC").fit(test)
        assert best.getBestModel().uid == model.uid
        model.write().save(str(tmp_path / "model"))
        loaded = TrainedClassifierModel.load(str(tmp_path / "model"))
        assert_same(expected[0], loaded.transform(test), key=by_id, exact=False)


def test_a_connect_client_that_runs_no_learners_is_told_so(jarless_connect, monkeypatch):
    """Spark Connect clients before 4.0 run no pyspark ML stages on the server: training there
    fails before any job, naming what to use instead."""
    from conftest import connect_mode

    from mmlspark.core import compat
    from mmlspark.core.wrapper import ConnectNotSupportedError

    with connect_mode():
        train = jarless_connect.createDataFrame(_rows(4, 1), SCHEMA)
        stage = _classifier("churn")
        monkeypatch.setattr(compat, "connect_ml_supported", lambda: False)
        with pytest.raises(ConnectNotSupportedError, match="use a classic session"):
            stage.fit(train)
