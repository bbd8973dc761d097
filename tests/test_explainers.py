"""The explainers (TabularSHAP, VectorSHAP, TabularLIME, VectorLIME) on both backends, against
independent references: the closed-form Shapley values of a linear model (coef_i * (x_i - mean
of the background's x_i), base value the mean prediction over the background), the shap package's
KernelExplainer and the lime package's LimeTabularExplainer on the same model function and
background (the models' own coefficients, evaluated with numpy).
"""

from __future__ import annotations

import lime.lime_tabular
import numpy as np
import pytest
import shap
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import VectorAssembler
from pyspark.ml.regression import LinearRegression
from pyspark.sql import functions as F

from mmlspark.explainers import TabularLIME, TabularSHAP, VectorLIME, VectorSHAP

BACKENDS = ["jvm", "python"]
COLS = ["a", "b", "c"]
ROWS = np.array([[1.0, 2.0, 0.0], [3.0, -1.0, 2.0], [0.0, 0.5, 1.0]])
BACKGROUND = np.array([[0.0, 0.0, 0.0], [2.0, 1.0, 1.0], [1.0, 3.0, 0.0], [1.0, 0.0, 3.0]])


@pytest.fixture(scope="module")
def fitted(spark):
    """A linear regression (y = 1 + 2a - 3b + 0.5c, noise-free) behind a VectorAssembler, and a
    logistic regression on the same features; the tables of rows and background rows."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, size=(30, 3))
    y = 1 + x @ np.array([2.0, -3.0, 0.5])
    label = (y + rng.normal(0, 1.5, size=30) > 1).astype(float)
    train = spark.createDataFrame(
        [(*map(float, r), float(t), float(lab)) for r, t, lab in zip(x, y, label, strict=True)],
        "a double, b double, c double, y double, label double",
    )
    assembler = VectorAssembler(inputCols=COLS, outputCol="features")
    regression = Pipeline(stages=[assembler, LinearRegression(labelCol="y")]).fit(train)
    features = assembler.transform(train)
    logistic = LogisticRegression(regParam=0.01).fit(features)
    rows = spark.createDataFrame(
        [tuple(map(float, r)) for r in ROWS], "a double, b double, c double"
    )
    background = spark.createDataFrame(
        [tuple(map(float, r)) for r in BACKGROUND], "a double, b double, c double"
    )
    return {
        "regression": regression,
        "linear": regression.stages[1],
        "logistic": logistic,
        "rows": rows,
        "background": background,
        "vectors": assembler.transform(rows).select("features"),
        "background_vectors": assembler.transform(background).select("features"),
    }


def _linear(model):
    w, b = model.coefficients.toArray(), model.intercept
    return lambda x: b + np.asarray(x) @ w


def _logistic(model):
    w, b = model.coefficients.toArray(), model.intercept
    return lambda x: 1.0 / (1.0 + np.exp(-(b + np.asarray(x) @ w)))


def _by_row(out, output: str, key=lambda r: tuple(r["features"].toArray())):
    return {key(r): np.array([v.toArray() for v in r[output]]) for r in out.collect()}


def _kernel_shap(f, x):
    """shap's KernelExplainer: every coalition of three features is enumerated (exact)."""
    explainer = shap.KernelExplainer(f, BACKGROUND)
    values = explainer.shap_values(x, nsamples=100, silent=True)
    return float(np.ravel(explainer.expected_value)[0]), np.asarray(values)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tabular_shap_gives_the_exact_shapley_values_of_a_linear_model(spark, fitted, backend):
    linear = fitted["linear"]
    f = _linear(linear)
    stage = TabularSHAP(
        inputCols=COLS, model=fitted["regression"], targetCol="prediction", outputCol="shap"
    ).setBackend(backend)
    out = stage.setBackgroundData(fitted["background"]).transform(fitted["rows"])
    assert out.columns == [*COLS, "shap", "r2"]
    got = _by_row(out, "shap", key=lambda r: (r["a"], r["b"], r["c"]))
    w = linear.coefficients.toArray()
    base, reference = _kernel_shap(f, ROWS)
    for i, x in enumerate(ROWS):
        (values,) = got[tuple(x)]
        expected = np.concatenate([[f(BACKGROUND).mean()], w * (x - BACKGROUND.mean(axis=0))])
        np.testing.assert_allclose(values, expected, atol=1e-6)
        np.testing.assert_allclose(values, np.concatenate([[base], reference[i]]), atol=1e-6)
    assert all(abs(r["r2"][0] - 1) < 1e-6 for r in out.collect())


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_shap_of_a_probability_equals_kernel_shap(spark, fitted, backend):
    """Classes [1, 0]: on the JVM as targetClasses, on Python as each row's targetClassesCol."""
    logistic = fitted["logistic"]
    stage = VectorSHAP(inputCol="features", model=logistic, outputCol="shap").setBackend(backend)
    rows = fitted["vectors"]
    if backend == "jvm":
        stage.setTargetClasses([1, 0])
    else:
        rows = rows.withColumn("classes", F.array(F.lit(1), F.lit(0)))
        stage.setTargetClassesCol("classes")
    out = stage.setBackgroundData(fitted["background_vectors"]).transform(rows)
    got = _by_row(out, "shap")
    base, reference = _kernel_shap(_logistic(logistic), ROWS)
    for i, x in enumerate(ROWS):
        one, zero = got[tuple(x)]
        np.testing.assert_allclose(one, np.concatenate([[base], reference[i]]), atol=1e-6)
        # class 0's probability is 1 - class 1's: its base and values mirror them
        np.testing.assert_allclose(zero, np.concatenate([[1 - base], -reference[i]]), atol=1e-6)


def test_sampled_shap_is_close_to_the_exact_values_and_sums_exactly(spark, fitted):
    """With fewer samples than coalitions, the coalitions are drawn; the efficiency constraint
    still holds exactly, and a linear model's values are recovered from any coalitions that span
    the features. Three features (6 coalitions), 4 drawn; the JVM backend."""
    linear = fitted["linear"]
    model = VectorSHAP(inputCol="features", model=linear, targetCol="prediction", numSamples=4)
    rows = fitted["vectors"].limit(1)
    out = model.setBackgroundData(fitted["background_vectors"]).transform(rows).collect()[0]
    values = out["explanation"][0].toArray()
    x = out["features"].toArray()
    f = _linear(linear)
    assert values[0] == pytest.approx(f(BACKGROUND).mean(), abs=1e-9)
    assert values[0] + values[1:].sum() == pytest.approx(float(f(x)), abs=1e-9)
    w = linear.coefficients.toArray()
    np.testing.assert_allclose(values[1:], w * (x - BACKGROUND.mean(axis=0)), atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lime_recovers_the_coefficients_per_standard_deviation(spark, fitted, backend):
    """On a linear model, LIME's local fit is exact: coef_i * std_i of the background (the
    scaling LIME explains in); lime's own explainer agrees in sign and rank."""
    linear = fitted["linear"]
    w, std = linear.coefficients.toArray(), BACKGROUND.std(axis=0)
    tabular = TabularLIME(
        inputCols=COLS,
        model=fitted["regression"],
        targetCol="prediction",
        numSamples=50,
        outputCol="lime",
    ).setBackend(backend)
    out = tabular.setBackgroundData(fitted["background"]).transform(fitted["rows"])
    vector = VectorLIME(
        inputCol="features", model=linear, targetCol="prediction", numSamples=50, outputCol="lime"
    ).setBackend(backend)
    out_vectors = vector.setBackgroundData(fitted["background_vectors"]).transform(
        fitted["vectors"]
    )
    explainer = lime.lime_tabular.LimeTabularExplainer(
        BACKGROUND, mode="regression", discretize_continuous=False, random_state=0
    )
    for frame in (out, out_vectors):
        rows = frame.collect()
        assert len(rows) == 3
        for r in rows:
            (coefficients,) = [v.toArray() for v in r["lime"]]
            np.testing.assert_allclose(coefficients, w * std, atol=1e-6)
            assert abs(r["r2"][0] - 1) < 1e-6
    reference = explainer.explain_instance(ROWS[0], _linear(linear), num_samples=500)
    theirs = np.zeros(3)
    # lime keeps a regression's weights under label 1 (label 0 holds them negated)
    for feature, weight in reference.as_map()[1]:
        theirs[feature] = weight
    assert np.array_equal(np.sign(theirs), np.sign(w * std))
    assert np.array_equal(np.argsort(np.abs(theirs)), np.argsort(np.abs(w * std)))


def test_save_load_and_pipeline_round_trip_on_both_backends(spark, fitted, tmp_path):
    """Saved on the Python backend, loaded on the JVM (and back), inside a PipelineModel too:
    the same params, background and values."""
    stage = (
        TabularSHAP(inputCols=COLS, model=fitted["regression"], targetCol="prediction")
        .setBackend("python")
        .setBackgroundData(fitted["background"])
    )
    expected = _by_row(stage.transform(fitted["rows"]), "explanation", key=lambda r: r["a"])
    stage.save(str(tmp_path / "py"))
    loaded = TabularSHAP.load(str(tmp_path / "py"))
    assert loaded.getBackend() == "jvm" and loaded.uid == stage.uid
    assert loaded.getInputCols() == COLS and loaded.getBackgroundData().count() == 4
    PipelineModel(stages=[loaded]).save(str(tmp_path / "pipeline"))
    (again,) = PipelineModel.load(str(tmp_path / "pipeline")).stages
    assert isinstance(again, TabularSHAP)
    # the pipeline's stage runs on Python with the background the JVM loaded
    for explainer in (loaded, again.setBackend("python")):
        got = _by_row(explainer.transform(fitted["rows"]), "explanation", key=lambda r: r["a"])
        assert got.keys() == expected.keys()
        for key, values in expected.items():
            np.testing.assert_allclose(got[key], values, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_misuse_fails_before_any_job_naming_the_problem(spark, fitted, backend):
    def stage(**params):
        return (
            TabularSHAP(model=fitted["regression"], **params)
            .setBackend(backend)
            .setBackgroundData(fitted["background"])
        )

    with pytest.raises(Exception, match="inputCols"):
        stage(targetCol="prediction").transform(fitted["rows"])
    with pytest.raises(Exception, match="'probability' does not exist"):
        stage(inputCols=COLS).transform(fitted["rows"])
    with pytest.raises(ValueError, match="numSamples"):
        stage(inputCols=COLS, numSamples=0)
    with pytest.raises(ValueError, match="numSamples"):
        VectorLIME().setBackend(backend).setNumSamples(0)
    with pytest.raises(Exception, match="no backgroundData"):
        TabularSHAP(inputCols=COLS, model=fitted["regression"], targetCol="prediction").setBackend(
            backend
        ).transform(fitted["rows"])


def test_on_a_connect_server_without_the_jar(jarless_connect):
    """The Python backend over Spark Connect, with pyspark's learner fitted on the server: the
    exact Shapley values and LIME's scaled coefficients of the linear model."""
    from conftest import connect_mode

    with connect_mode():
        rng = np.random.default_rng(3)
        x = rng.normal(0, 1, size=(20, 3))
        train = jarless_connect.createDataFrame(
            [(*map(float, r), float(1 + r @ np.array([2.0, -3.0, 0.5]))) for r in x],
            "a double, b double, c double, y double",
        )
        assembler = VectorAssembler(inputCols=COLS, outputCol="features")
        model = Pipeline(stages=[assembler, LinearRegression(labelCol="y")]).fit(train)
        w = model.stages[1].coefficients.toArray()
        schema = "a double, b double, c double"
        rows = jarless_connect.createDataFrame([tuple(map(float, r)) for r in ROWS], schema)
        background = jarless_connect.createDataFrame(
            [tuple(map(float, r)) for r in BACKGROUND], schema
        )
        stage = TabularSHAP(inputCols=COLS, model=model, targetCol="prediction")
        assert stage.getBackend() == "python"
        out = stage.setBackgroundData(background).transform(rows).collect()
        lime_stage = TabularLIME(inputCols=COLS, model=model, targetCol="prediction", numSamples=30)
        weights = lime_stage.setBackgroundData(background).transform(rows).collect()
    for r in out:
        x_row = np.array([r["a"], r["b"], r["c"]])
        np.testing.assert_allclose(
            r["explanation"][0].toArray()[1:], w * (x_row - BACKGROUND.mean(axis=0)), atol=1e-6
        )
    for r in weights:
        np.testing.assert_allclose(
            r["explanation"][0].toArray(), w * BACKGROUND.std(axis=0), atol=1e-6
        )


def test_a_categorical_column_on_both_backends_alike(spark):
    """A string column: SHAP's values worked by hand (two features, exact), and LIME's samples
    drawn from the background's frequencies, the same draws on both backends (the same seeds)."""
    from pyspark.ml.feature import SQLTransformer

    rows = spark.createDataFrame(
        [("x", 1.0), ("y", 2.0), ("z", 0.5), ("x", None)], "k string, v double"
    )
    background = spark.createDataFrame(
        [("x", 0.0), ("y", 1.0), ("y", 3.0), ("z", 1.0)], "k string, v double"
    )
    model = SQLTransformer(
        statement="SELECT *, CASE k WHEN 'x' THEN 1.0 WHEN 'y' THEN 3.0 ELSE -2.0 END + 2 * v "
        "AS prediction FROM __THIS__"
    )
    got = {}
    for backend in BACKENDS:
        shap_stage = TabularSHAP(inputCols=["k", "v"], model=model, targetCol="prediction")
        shap_stage.setBackend(backend).setBackgroundData(background)
        lime_stage = TabularLIME(
            inputCols=["k", "v"],
            categoricalFeatures=["k"],
            model=model,
            targetCol="prediction",
            numSamples=300,
        )
        lime_stage.setBackend(backend).setBackgroundData(background)
        got[backend] = [
            {
                r.k: r.explanation[0].toArray()
                for r in stage.transform(rows).collect()
                if r.v is not None or r.explanation is not None  # a null input: a null output
            }
            for stage in (shap_stage, lime_stage)
        ]
        assert all(len(values) == 3 for values in got[backend])
    # f(background) = 1, 5, 9, 0: base 3.75; for ("x", 1.0), f = 3: phi_k = ((1 + 2 * 1.25 -
    # 3.75) + (3 - (1.25 + 2))) / 2 = -0.25, phi_v = -0.5 (they add up to 3 - 3.75)
    hand = {"x": [3.75, -0.25, -0.5], "y": [3.75, 1.75, 1.5], "z": [3.75, -3.25, -1.5]}
    lime_values = got["jvm"][1]
    for backend in BACKENDS:
        shap_values, lime_got = got[backend]
        for k, values in hand.items():
            np.testing.assert_allclose(shap_values[k], values, atol=1e-9)
            np.testing.assert_allclose(lime_got[k], lime_values[k], atol=1e-9)
    # the row's own category: worth more than the others' for "y" (3), less for "z" (-2); v's
    # coefficient is 2 per background standard deviation of v
    assert lime_values["y"][0] > 1 and lime_values["z"][0] < -2
    for values in lime_values.values():
        assert values[1] == pytest.approx(2 * np.std([0.0, 1.0, 3.0, 1.0]), abs=0.25)
