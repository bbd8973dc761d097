"""Training and evaluation tools against scikit-learn's metrics on the same predictions.

Tests taking `session` run on a classic and on a Spark Connect session from one body. The others
are classic only on the JVM backend, by design: `TrainClassifier`, `TrainRegressor` and
`FindBestModel` take the learner (or the models) as a stage-valued param, which a Connect client
cannot set on a JVM stage (DESIGN, contract 1; the error is checked in test_connect.py). Their
fitted models hold stages too, so a Connect server with the jar cannot load them (it answers a load
with every param's value); the test of saving and loading checks the clear error that gives over
Connect. On the Python backend these stages run over Connect too (tests/test_python_train.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import connect_mode
from metrics_reference import assert_classification_metrics
from pyspark.errors import IllegalArgumentException
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import Imputer, OneHotEncoder, StringIndexer, VectorAssembler
from pyspark.ml.regression import LinearRegression
from sklearn import metrics

from mmlspark.core.wrapper import ConnectNotSupportedError
from mmlspark.train import (
    ComputeModelStatistics,
    ComputePerInstanceStatistics,
    TrainClassifier,
    TrainedClassifierModel,
    TrainRegressor,
)

SCHEMA = "id int, age double, plan string, member boolean, visits array<double>, label string"


def _rows(n: int, seed: int, plans: list[str]) -> list[tuple]:
    """Customers: churn ('yes'/'no') depends on age, plan and membership, with noise and nulls."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        age = float(rng.integers(18, 80))
        plan = plans[int(rng.integers(0, len(plans)))]
        member = bool(rng.integers(0, 2))
        visits = [float(rng.poisson(3)), float(rng.poisson(1))]
        score = 0.08 * (age - 45) + (1.5 if plan == "basic" else 0) - (1.2 if member else 0)
        label = "yes" if score + rng.normal(0, 0.7) > 0 else "no"
        rows.append(
            (
                i,
                None if i % 23 == 0 else age,
                None if i % 31 == 0 else plan,
                member,
                visits,
                label,
            )
        )
    return rows


@pytest.fixture(scope="module")
def churn(spark):
    train = spark.createDataFrame(_rows(400, 1, ["basic", "pro", "team"]), SCHEMA)
    # The test set has a plan never seen in training.
    test = spark.createDataFrame(_rows(200, 2, ["basic", "pro", "team", "enterprise"]), SCHEMA)
    return train, test


@pytest.mark.lines
def test_train_classifier_metrics_match_scikit_learn(churn):
    train, test = churn
    model = TrainClassifier(model=LogisticRegression(), labelCol="label").fit(train)
    scored = model.transform(test)
    stats = ComputeModelStatistics().transform(scored).first()
    rows = scored.select("label", "prediction", "probability").collect()
    y_true = [r.label for r in rows]
    y_pred = [r.prediction for r in rows]
    assert set(y_pred) <= {"yes", "no"}
    p = assert_classification_metrics(stats, y_true, y_pred, ["no", "yes"])
    assert stats.precision == pytest.approx(p.mean(), abs=1e-12)
    scores = [r.probability[1] for r in rows]
    assert stats.AUC == pytest.approx(metrics.roc_auc_score(y_true, scores), abs=1e-12)
    assert stats.accuracy > 0.7  # the signal is learnable


def test_accuracy_equals_the_hand_built_pipeline(churn):
    train, test = churn
    ours = TrainClassifier(model=LogisticRegression(), labelCol="label").fit(train)
    accuracy = ComputeModelStatistics().transform(ours.transform(test)).first().accuracy

    def prepare(df):
        return df.selectExpr(
            "*",
            "CAST(member AS DOUBLE) AS member_d",
            "visits[0] AS v0",
            "visits[1] AS v1",
            "CASE WHEN label = 'yes' THEN 1.0 ELSE 0.0 END AS y",
        )

    hand = Pipeline(
        stages=[
            Imputer(inputCols=["age", "member_d", "v0", "v1"], outputCols=["a", "m", "w0", "w1"]),
            StringIndexer(inputCol="plan", outputCol="plan_i", handleInvalid="keep"),
            OneHotEncoder(inputCol="plan_i", outputCol="plan_v", handleInvalid="keep"),
            VectorAssembler(inputCols=["a", "m", "w0", "w1", "plan_v"], outputCol="features"),
            LogisticRegression(labelCol="y"),
        ]
    ).fit(prepare(train))
    rows = hand.transform(prepare(test)).select("y", "prediction").collect()
    hand_accuracy = sum(r.y == r.prediction for r in rows) / len(rows)
    assert accuracy == pytest.approx(hand_accuracy, abs=0.01)


@pytest.mark.lines
def test_multiclass_and_per_instance_log_loss_match_scikit_learn(spark):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 2))
    kinds = np.array(["cat", "deer", "empty"])[np.argmax(x @ [[1, -1, 0], [0, 1, -1]], axis=1)]
    df = spark.createDataFrame(
        [
            (i, float(a), float(b), str(k))
            for i, ((a, b), k) in enumerate(zip(x, kinds, strict=True))
        ],
        "id int, a double, b double, species string",
    )
    model = TrainClassifier(model=LogisticRegression(), labelCol="species").fit(df)
    scored = ComputePerInstanceStatistics(labelCol="species").transform(model.transform(df))
    rows = scored.orderBy("id").collect()
    labels = ["cat", "deer", "empty"]
    probabilities = np.array([r.probability.toArray() for r in rows])
    truth = [r.species for r in rows]
    for r, p in zip(rows, probabilities, strict=True):
        assert r.log_loss == pytest.approx(metrics.log_loss([r.species], [p], labels=labels))
    mean = np.mean([r.log_loss for r in rows])
    assert mean == pytest.approx(metrics.log_loss(truth, probabilities, labels=labels), rel=1e-9)
    stats = ComputeModelStatistics(labelCol="species").transform(scored).first()
    predicted = [r.prediction for r in rows]
    assert stats.AUC is None
    assert stats.recall == pytest.approx(
        metrics.recall_score(truth, predicted, average="macro", zero_division=0), abs=1e-12
    )
    assert stats.confusion_matrix == metrics.confusion_matrix(truth, predicted).tolist()


@pytest.mark.lines
def test_regression_metrics_match_scikit_learn(spark):
    rng = np.random.default_rng(9)
    n = 200
    x = rng.normal(size=n)
    city = rng.choice(["a", "b", "c"], size=n)
    y = 3 * x + (city == "b") * 2 + rng.normal(0, 0.5, size=n)
    df = spark.createDataFrame(
        [(i, float(x[i]), str(city[i]), float(y[i])) for i in range(n)],
        "id int, x double, city string, label double",
    )
    model = TrainRegressor(model=LinearRegression(), labelCol="label").fit(df)
    scored = ComputePerInstanceStatistics().transform(model.transform(df)).orderBy("id")
    stats = ComputeModelStatistics().transform(scored).first()
    rows = scored.collect()
    truth = np.array([r.label for r in rows])
    predicted = np.array([r.prediction for r in rows])
    assert stats.mean_squared_error == pytest.approx(metrics.mean_squared_error(truth, predicted))
    assert stats.root_mean_squared_error == pytest.approx(
        np.sqrt(metrics.mean_squared_error(truth, predicted))
    )
    assert stats.r2 == pytest.approx(metrics.r2_score(truth, predicted))
    assert stats.mean_absolute_error == pytest.approx(metrics.mean_absolute_error(truth, predicted))
    np.testing.assert_allclose([r.L1_loss for r in rows], np.abs(truth - predicted))
    np.testing.assert_allclose([r.L2_loss for r in rows], (truth - predicted) ** 2)
    assert stats.r2 > 0.9


def test_plain_spark_model_output_is_scored_too(session):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(150, 2))
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.normal(0, 0.5, 150) > 0).astype(float)
    df = session.createDataFrame(
        [(i, float(a), float(b), float(c)) for i, ((a, b), c) in enumerate(zip(x, y, strict=True))],
        "id int, a double, b double, label double",
    )
    assembled = VectorAssembler(inputCols=["a", "b"], outputCol="features").transform(df)
    scored = LogisticRegression().fit(assembled).transform(assembled)
    stats = ComputeModelStatistics().transform(scored).first()
    per_row = ComputePerInstanceStatistics().transform(scored).orderBy("id").collect()
    truth = [r.label for r in per_row]
    probabilities = np.array([r.probability.toArray() for r in per_row])
    assert stats.labels == ["0.0", "1.0"]
    assert stats.AUC == pytest.approx(metrics.roc_auc_score(truth, probabilities[:, 1]))
    assert stats.accuracy == pytest.approx(
        metrics.accuracy_score(truth, [r.prediction for r in per_row])
    )
    for r, p in zip(per_row, probabilities, strict=True):
        assert r.log_loss == pytest.approx(metrics.log_loss([r.label], [p], labels=[0.0, 1.0]))


def test_plain_spark_regression_output_is_scored_too(session):
    rng = np.random.default_rng(5)
    x = rng.normal(size=120)
    y = 2 * x + rng.normal(0, 0.3, size=120)
    df = session.createDataFrame(
        [(i, float(x[i]), float(y[i])) for i in range(120)], "id int, x double, label double"
    )
    assembled = VectorAssembler(inputCols=["x"], outputCol="features").transform(df)
    scored = LinearRegression().fit(assembled).transform(assembled)
    stats = ComputeModelStatistics().transform(scored).first()
    rows = ComputePerInstanceStatistics().transform(scored).orderBy("id").collect()
    truth = np.array([r.label for r in rows])
    predicted = np.array([r.prediction for r in rows])
    assert stats.mean_squared_error == pytest.approx(metrics.mean_squared_error(truth, predicted))
    assert stats.r2 == pytest.approx(metrics.r2_score(truth, predicted))
    assert stats.mean_absolute_error == pytest.approx(metrics.mean_absolute_error(truth, predicted))
    np.testing.assert_allclose([r.L2_loss for r in rows], (truth - predicted) ** 2)


@pytest.fixture(scope="module")
def saved_churn_pipeline(churn, tmp_path_factory):
    """A TrainClassifier pipeline fitted and saved on the classic session, with its predictions."""
    train, test = churn
    fitted = Pipeline(stages=[TrainClassifier(model=LogisticRegression(maxIter=20))]).fit(train)
    path = str(tmp_path_factory.mktemp("churn") / "pipeline")
    fitted.write().overwrite().save(path)
    scored = fitted.transform(test).select("id", "prediction", "probability").collect()
    return path, {r.id: (r.prediction, r.probability.toArray()) for r in scored}


def test_fitted_models_save_and_load_in_pipelines(spark, saved_churn_pipeline):
    path, expected = saved_churn_pipeline
    reloaded = PipelineModel.load(path)
    assert isinstance(reloaded.stages[0], TrainedClassifierModel)
    assert reloaded.stages[0].getLevels() == ["no", "yes"]
    test = spark.createDataFrame(_rows(200, 2, ["basic", "pro", "team", "enterprise"]), SCHEMA)
    rows = reloaded.transform(test).select("id", "prediction", "probability").collect()
    assert sorted(r.id for r in rows) == sorted(expected)
    for r in rows:
        prediction, probability = expected[r.id]
        assert r.prediction == prediction
        np.testing.assert_allclose(r.probability.toArray(), probability, rtol=1e-12)


def test_a_fitted_model_holding_stages_is_refused_clearly_over_connect(
    connect_spark, saved_churn_pipeline
):
    path, _ = saved_churn_pipeline
    with connect_mode(), pytest.raises(ConnectNotSupportedError) as error:
        PipelineModel.load(path)
    assert "TrainedClassifierModel" in str(error.value)
    assert "featurization, model" in str(error.value)
    assert "classic session" in str(error.value)


def test_bad_input_fails_clearly(spark, churn):
    train, _ = churn
    with pytest.raises(IllegalArgumentException, match="'model' must be set"):
        TrainClassifier().fit(train)
    with pytest.raises(IllegalArgumentException, match="input column 'nope' does not exist"):
        TrainClassifier(model=LogisticRegression(), labelCol="nope").fit(train)
    odd = train.selectExpr("map('a', age) AS m", "label")
    with pytest.raises(IllegalArgumentException, match="'m' must be numeric, boolean, string"):
        TrainClassifier(model=LogisticRegression()).fit(odd)
    with pytest.raises(IllegalArgumentException, match="no row has a label"):
        TrainClassifier(model=LogisticRegression()).fit(train.limit(0))
    with pytest.raises(IllegalArgumentException, match="numeric for a regression metric"):
        ComputeModelStatistics(evaluationMetric="regression").transform(
            train.selectExpr("label", "label AS prediction")
        )
    with pytest.raises(ValueError, match="evaluationMetric"):
        ComputeModelStatistics(evaluationMetric="f1")


def test_find_best_model_picks_the_best_and_keeps_the_roc(churn, tmp_path):
    from mmlspark.automl import BestModel, FindBestModel

    train, test = churn
    weak = TrainClassifier(model=LogisticRegression(regParam=10.0), inputCols=["visits"]).fit(train)
    strong = TrainClassifier(model=LogisticRegression()).fit(train)
    best = FindBestModel(models=[weak, strong], evaluationMetric="AUC").fit(test)
    scored = strong.transform(test).select("label", "probability").collect()
    truth = [r.label for r in scored]
    scores = [r.probability[1] for r in scored]
    assert best.getBestModel().uid == strong.uid
    table = {r.model_uid: r for r in best.getAllModelMetrics().collect()}
    assert set(table) == {weak.uid, strong.uid}
    assert table[strong.uid].AUC == pytest.approx(metrics.roc_auc_score(truth, scores))
    assert table[strong.uid].AUC > table[weak.uid].AUC
    fpr, tpr, _ = metrics.roc_curve(truth, scores, pos_label="yes", drop_intermediate=False)
    expected = sorted(set(zip(fpr.round(12), tpr.round(12), strict=True)))
    ours = sorted({(round(r[0], 12), round(r[1], 12)) for r in best.getRocCurve().collect()})
    assert ours == expected
    best.write().overwrite().save(str(tmp_path / "best"))
    loaded = BestModel.load(str(tmp_path / "best"))
    assert loaded.getAllModelMetrics().count() == 2
    assert loaded.getBestModelMetrics().first().model_uid == strong.uid
    assert sorted(map(str, loaded.transform(test).select("id", "prediction").collect())) == sorted(
        map(str, best.transform(test).select("id", "prediction").collect())
    )


def _reviews(n: int, seed: int) -> list[tuple]:
    """Short reviews drawn from a positive and a negative vocabulary that share neutral words, with
    a few labels flipped: nearly every review is distinct, so only the words generalise."""
    rng = np.random.default_rng(seed)
    positive = [f"good{i}" for i in range(40)]
    negative = [f"bad{i}" for i in range(40)]
    shared = [f"word{i}" for i in range(60)]
    rows = []
    for i in range(n):
        label = int(rng.integers(0, 2))
        own = positive if label == 1 else negative
        words = [
            str(rng.choice(own)) if rng.random() < 0.45 else str(rng.choice(shared))
            for _ in range(int(rng.integers(4, 10)))
        ]
        noisy = 1 - label if rng.random() < 0.05 else label
        rows.append((i, " ".join(words).capitalize() + ".", "web" if i % 2 else "app", noisy))
    return rows


@pytest.mark.lines
def test_free_text_is_hashed_like_a_hand_built_pipeline(spark):
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.feature import HashingTF, RegexTokenizer

    df = spark.createDataFrame(_reviews(800, 5), "id int, review string, source string, label int")
    train, test = df.filter("id % 4 != 0").cache(), df.filter("id % 4 = 0").cache()

    def auc(scored):
        return BinaryClassificationEvaluator(rawPredictionCol="probability").evaluate(
            scored.selectExpr("probability", "CAST(label AS DOUBLE) AS label")
        )

    learner = LogisticRegression(maxIter=10)
    buckets = 1 << 14
    ours = TrainClassifier(model=learner, inputCols=["review", "source"], numFeatures=buckets).fit(
        train
    )
    assert ours.getTextCols() == ["review"] and ours.getCategoricalCols() == ["source"]
    hand = Pipeline(
        stages=[
            RegexTokenizer(inputCol="review", outputCol="words", pattern="\\W+"),
            HashingTF(inputCol="words", outputCol="features", numFeatures=buckets),
            LogisticRegression(maxIter=10),
        ]
    ).fit(train)
    onehot = TrainClassifier(
        model=learner, inputCols=["review", "source"], categoricalCols=["review"]
    ).fit(train)
    ours_auc, hand_auc, onehot_auc = (auc(m.transform(test)) for m in (ours, hand, onehot))
    print(f"AUC ours={ours_auc:.4f} hand-built hashing={hand_auc:.4f} one-hot={onehot_auc:.4f}")
    assert ours_auc == pytest.approx(hand_auc, abs=0.02)
    assert hand_auc > 0.85
    assert onehot_auc < hand_auc - 0.2


@pytest.mark.lines
def test_statistics_need_no_column_names_after_training(spark, churn):
    from mmlspark.automl import FindBestModel

    train, test = churn
    train, test = (d.withColumnRenamed("label", "churned") for d in (train, test))
    model = TrainClassifier(model=LogisticRegression(), labelCol="churned").fit(train)
    scored = model.transform(test)
    stats = ComputeModelStatistics().transform(scored).first()
    rows = scored.select("churned", "prediction", "probability").collect()
    truth, predicted = [r.churned for r in rows], [r.prediction for r in rows]
    assert stats.accuracy == pytest.approx(metrics.accuracy_score(truth, predicted), abs=1e-12)
    assert stats.AUC == pytest.approx(
        metrics.roc_auc_score(truth, [r.probability[1] for r in rows]), abs=1e-12
    )
    losses = ComputePerInstanceStatistics().transform(scored).select("log_loss").collect()
    probabilities = [r.probability.toArray() for r in rows]
    assert np.mean([r.log_loss for r in losses]) == pytest.approx(
        metrics.log_loss(truth, probabilities, labels=["no", "yes"]), rel=1e-9
    )
    weak = TrainClassifier(
        model=LogisticRegression(), labelCol="churned", inputCols=["visits"]
    ).fit(train)
    best = FindBestModel(models=[weak, model]).fit(test)
    assert best.getBestModel().uid == model.uid

    regressor = TrainRegressor(model=LinearRegression(), labelCol="age").fit(
        train.filter("age IS NOT NULL")
    )
    scored = regressor.transform(test.filter("age IS NOT NULL"))
    stats = ComputeModelStatistics().transform(scored).first()
    rows = scored.select("age", "prediction").collect()
    truth, predicted = [r.age for r in rows], [r.prediction for r in rows]
    assert stats.mean_squared_error == pytest.approx(metrics.mean_squared_error(truth, predicted))
    assert stats.r2 == pytest.approx(metrics.r2_score(truth, predicted))
    with pytest.raises(IllegalArgumentException, match="scoredLabelsCol"):
        ComputeModelStatistics().transform(test.drop("churned"))
