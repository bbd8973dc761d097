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


@pytest.fixture(scope="module", params=["churn", "species"])
def classified(request, data):
    """A binary (churn) and a three-class (species) classifier fitted on both backends, and
    their outputs on the test rows."""
    train, test = data
    jvm, python = pair(_classifier(request.param))
    jvm_model, py_model = _fitted_pair(jvm, python, train)
    return request.param, jvm_model, py_model, jvm_model.transform(test), py_model.transform(test)


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
    assert got.labels == levels
    assert got.accuracy == pytest.approx(metrics.accuracy_score(truth, predicted), abs=1e-12)
    p, r, f, _ = metrics.precision_recall_fscore_support(
        truth, predicted, labels=levels, zero_division=0
    )
    np.testing.assert_allclose(got.precision_per_class, p, atol=1e-12)
    np.testing.assert_allclose(got.recall_per_class, r, atol=1e-12)
    np.testing.assert_allclose(got.f1_per_class, f, atol=1e-12)
    assert got.f1 == pytest.approx(f.mean(), abs=1e-12)
    assert got.confusion_matrix == metrics.confusion_matrix(truth, predicted, labels=levels).tolist()
    if label == "churn":
        scores = [r.probability[1] for r in rows]
        assert got.AUC == pytest.approx(metrics.roc_auc_score(truth, scores), abs=1e-12)
        evaluator = BinaryClassificationEvaluator(rawPredictionCol="probability", numBins=0)
        spark_auc = evaluator.evaluate(py_out.selectExpr("probability", "DOUBLE(churn = 'yes') AS label"))
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


def test_find_best_model_chooses_alike_and_keeps_the_roc(data):
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
