"""TextLIME, TextSHAP and ICETransformer on both backends, against independent references: the
exact Shapley values of the tokens worked by brute force over every subset of them, scored by the
model itself; the lime package's LimeTextExplainer on the same model; and numpy's and
scikit-learn's partial dependence (sklearn.inspection.partial_dependence) of the same function.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from lime.lime_text import LimeTextExplainer
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import HashingTF, SQLTransformer, Tokenizer
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.inspection import partial_dependence

from mmlspark.explainers import ICETransformer, TextLIME, TextSHAP

BACKENDS = ["jvm", "python"]
FILLER = ["the", "movie", "was", "plot", "a", "film", "acting", "story", "long", "music"]
ROW = "the plot was great"


@pytest.fixture(scope="module")
def sentiment(spark):
    """Tokenizer + HashingTF + LogisticRegression trained where the word 'great' alone decides
    the label; a function scoring texts with it (P(label 1)), for the references."""
    rng = np.random.default_rng(11)
    texts = []
    for i in range(48):
        words = list(rng.choice(FILLER, size=4))
        if i % 2:
            words.insert(int(rng.integers(0, 5)), "great")
        texts.append((" ".join(words), float(i % 2)))
    train = spark.createDataFrame(texts, "text string, label double")
    model = Pipeline(
        stages=[
            Tokenizer(inputCol="text", outputCol="words"),
            HashingTF(inputCol="words", outputCol="features", numFeatures=1 << 12),
            LogisticRegression(regParam=0.01),
        ]
    ).fit(train)

    def score(batch):
        frame = spark.createDataFrame([(t,) for t in batch], "text string")
        out = model.transform(frame).select("text", "probability").collect()
        by_text = {r["text"]: float(r["probability"][1]) for r in out}
        return np.array([by_text[t] for t in batch])

    return model, score


def _brute_force_shapley(tokens, score):
    """phi_j = sum over subsets S without j of |S|! (M - |S| - 1)! / M! (f(S + j) - f(S)), each
    subset scored as its tokens' text in order."""
    m = len(tokens)
    subsets = list(itertools.product([0, 1], repeat=m))
    texts = [" ".join(t for t, keep in zip(tokens, s, strict=True) if keep) for s in subsets]
    values = dict(zip(subsets, score(texts), strict=True))
    phis = np.zeros(m)
    for s, value in values.items():
        for j in range(m):
            if s[j]:
                continue
            with_j = tuple(1 if i == j else v for i, v in enumerate(s))
            size = sum(s)
            weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            phis[j] += weight * (values[with_j] - value)
    return values[tuple([0] * m)], values[tuple([1] * m)], phis


def test_text_shap_is_exact_and_efficient_on_both_backends(spark, sentiment):
    model, score = sentiment
    rows = spark.createDataFrame([(ROW, 1), ("", 2), (None, 3)], "text string, id int")
    tokens = ROW.split()
    base, full, phis = _brute_force_shapley(tokens, score)
    got = {}
    for backend in BACKENDS:
        stage = TextSHAP(inputCol="text", model=model, targetClasses=[1]).setBackend(backend)
        out = stage.transform(rows)
        assert out.columns == ["text", "id", "tokens", "explanation", "r2"]
        by_id = {r["id"]: r for r in out.collect()}
        assert by_id[1]["tokens"] == tokens and by_id[2]["tokens"] == []
        assert by_id[2]["explanation"] is None and by_id[3]["explanation"] is None
        (values,) = by_id[1]["explanation"]
        values = values.toArray()
        got[backend] = values
        # efficiency: the base value is f(empty text), the values add up to f(x) - f(empty)
        assert values[0] == pytest.approx(base, abs=1e-9)
        assert values[1:].sum() == pytest.approx(full - base, abs=1e-9)
        np.testing.assert_allclose(values[1:], phis, atol=1e-6)
        assert tokens[int(np.argmax(values[1:]))] == "great"
    np.testing.assert_allclose(got["jvm"], got["python"], atol=1e-9)


def test_text_lime_ranks_the_keyword_first_and_agrees_with_lime(spark, sentiment):
    model, score = sentiment
    text = "the movie was great a long story"
    rows = spark.createDataFrame([(text,)], "text string")
    got = {}
    for backend in BACKENDS:
        stage = TextLIME(inputCol="text", model=model, targetClasses=[1], numSamples=200)
        out = stage.setBackend(backend).transform(rows).first()
        weights = out["explanation"][0].toArray()
        assert out["tokens"] == text.split() and len(weights) == 7
        assert out["tokens"][int(np.argmax(np.abs(weights)))] == "great"
        got[backend] = weights
    # the same hashed draws on both backends: the same samples, the same fit
    np.testing.assert_allclose(got["jvm"], got["python"], atol=1e-6)

    def classifier(texts):
        p = score(list(texts))
        return np.stack([1 - p, p], axis=1)

    theirs = dict(
        LimeTextExplainer(random_state=0)
        .explain_instance(text, classifier, labels=(1,), num_features=7, num_samples=300)
        .as_list(label=1)
    )
    ours = dict(zip(text.split(), got["jvm"], strict=True))
    assert max(theirs, key=lambda t: abs(theirs[t])) == "great"
    strong = [t for t in theirs if abs(theirs[t]) > 0.1 * abs(theirs["great"])]
    assert "great" in strong and all(np.sign(theirs[t]) == np.sign(ours[t]) for t in strong)


# --- ICETransformer: y = x^2 + 3 * [c == 'b'] - [c == 'c'] + z, as SQL and as numpy
X = np.array([0.0, 1.0, 2.0, 4.0, -1.0])
C = ["a", "b", "b", "c", "b"]
Z = np.array([1.0, 0.0, 2.0, 0.5, 1.0])
STATEMENT = (
    "SELECT *, x * x + CASE c WHEN 'b' THEN 3.0 WHEN 'c' THEN -1.0 ELSE 0.0 END + z "
    "AS prediction FROM __THIS__"
)


def _f(x, c, z):
    return x**2 + np.select([c == "b", c == "c"], [3.0, -1.0], 0.0) + z


class _Function(RegressorMixin, BaseEstimator):
    """The model's function over numeric columns (x, z, c coded 0 a, 1 b, 2 c), for sklearn."""

    def fit(self, x, y=None):
        self.fitted_ = True
        return self

    def predict(self, x):
        x = np.asarray(x, dtype=float)
        return _f(x[:, 0], np.array(["a", "b", "c"])[x[:, 2].astype(int)], x[:, 1])


@pytest.fixture(scope="module")
def ice_data(spark):
    rows = spark.createDataFrame(
        [(float(x), c, float(z)) for x, c, z in zip(X, C, Z, strict=True)],
        "x double, c string, z double",
    )
    return rows, SQLTransformer(statement=STATEMENT)


def _ice(backend, model, **params):
    return ICETransformer(model=model, targetCol="prediction", **params).setBackend(backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ice_individual_and_average_equal_numpy_and_sklearn(spark, ice_data, backend):
    rows, model = ice_data
    # 4 grid values: fewer than x's 5 distinct ones, so scikit-learn's grid is the linspace too
    grid = np.linspace(X.min(), X.max(), 4)
    numeric = {"name": "x", "numSplits": 3}
    categorical = {"name": "c", "numTopValues": 2, "outputColName": "c_ice"}
    stage = _ice(backend, model, numericFeatures=[numeric], categoricalFeatures=[categorical])
    assert stage.getNumericFeatures() == [json.dumps(numeric)]
    out = stage.transform(rows)
    assert out.columns == ["x", "c", "z", "c_ice", "x_dependence"]
    c_array = np.array(C)
    individual = {}
    for r in out.collect():
        curve = r["x_dependence"]  # a dict: collect() keeps no map's order
        assert sorted(curve) == pytest.approx(list(grid))
        expected = _f(grid, np.array([r["c"]] * 4), np.full(4, r["z"]))
        np.testing.assert_allclose([curve[g][0] for g in sorted(curve)], expected, atol=1e-12)
        individual[r["x"]] = [curve[g][0] for g in sorted(curve)]
        # the two most frequent categories: b (3 rows), then a (one row; ties in order)
        assert set(r["c_ice"]) == {"b", "a"}
        assert r["c_ice"]["b"][0] - r["c_ice"]["a"][0] == pytest.approx(3.0)
    average = _ice(backend, model, numericFeatures=["x"], numSplits=3, kind="average")
    (row,) = average.transform(rows).collect()
    pdp = row["x_dependence"]
    mean = [np.mean(_f(np.full(5, g), c_array, Z)) for g in grid]
    np.testing.assert_allclose([pdp[g][0] for g in sorted(pdp)], mean, atol=1e-12)
    # scikit-learn's partial dependence of the same function, on its linspace(min, max) grid
    codes = np.array([["a", "b", "c"].index(c) for c in C], dtype=float)
    reference = partial_dependence(
        _Function().fit(None),
        np.stack([X, Z, codes], axis=1),
        features=[0],
        kind="both",
        grid_resolution=4,
        percentiles=(0, 1),
    )
    np.testing.assert_allclose(reference["grid_values"][0], grid, atol=1e-12)
    averaged = [pdp[g][0] for g in sorted(pdp)]
    np.testing.assert_allclose(averaged, reference["average"][0], atol=1e-12)
    for i, x in enumerate(X):
        np.testing.assert_allclose(individual[x], reference["individual"][0][i], atol=1e-12)


def test_ice_feature_importance_and_both_backends_alike(spark, ice_data):
    rows, model = ice_data
    results = {}
    for backend in BACKENDS:
        stage = _ice(
            backend, model, kind="feature", numericFeatures=["x", "z"], categoricalFeatures=["c"]
        )
        results[backend] = [
            (r["featureNames"], r["pdpBasedDependence"][0]) for r in stage.transform(rows).collect()
        ]
        ints = rows.selectExpr("CAST(x AS INT) AS n", "c", "z")
        integer_model = SQLTransformer(statement=STATEMENT.replace("x * x", "n * n"))
        average = _ice(backend, integer_model, kind="average", numericFeatures=["n"])
        (row,) = average.transform(ints).collect()
        # an integer column whose range (-1..4) has fewer values than numSplits: each integer
        assert sorted(row["n_dependence"]) == [-1, 0, 1, 2, 3, 4]
    names = [n for n, _ in results["jvm"]]
    assert names == [n for n, _ in results["python"]]
    c_array = np.array(C)
    pdp_x = [np.mean(_f(np.full(5, g), c_array, Z)) for g in np.linspace(-1, 4, 11)]
    pdp_z = [np.mean(_f(X, c_array, np.full(5, g))) for g in np.linspace(0, 2, 11)]
    pdp_c = [np.mean(_f(X, np.array([v] * 5), Z)) for v in ["b", "a", "c"]]
    expected = {
        "x": np.std(pdp_x, ddof=1),
        "z": np.std(pdp_z, ddof=1),
        "c": (max(pdp_c) - min(pdp_c)) / 4,
    }
    assert names == sorted(expected, key=lambda n: -expected[n])
    for backend in BACKENDS:
        for name, value in results[backend]:
            assert value == pytest.approx(expected[name], abs=1e-9)


def test_save_load_and_pipeline_round_trips(spark, sentiment, ice_data, tmp_path):
    """Saved on the Python backend, loaded on the JVM inside a PipelineModel: the same params and
    values (TextLIME's save and load: the Scala suite's)."""
    model, _ = sentiment
    rows = spark.createDataFrame([(ROW,)], "text string")
    stage = TextSHAP(inputCol="text", model=model, targetClasses=[1], tokensCol="words2")
    expected = stage.setBackend("python").transform(rows).collect()
    stage.save(str(tmp_path / "shap"))
    loaded = TextSHAP.load(str(tmp_path / "shap"))
    assert loaded.getBackend() == "jvm" and loaded.getTokensCol() == "words2"
    PipelineModel(stages=[loaded]).save(str(tmp_path / "pipeline"))
    (again,) = PipelineModel.load(str(tmp_path / "pipeline")).stages
    assert isinstance(again, TextSHAP) and again.uid == stage.uid
    _same(again.transform(rows).collect(), expected)  # on the JVM
    # SynapseML's per-feature dicts, held as JSON, through a pipeline saved on Python
    ice_rows, ice_model = ice_data
    setting = {"name": "x", "rangeMin": 0, "rangeMax": 2}
    ice = _ice("python", ice_model, numericFeatures=[setting], kind="average")
    PipelineModel(stages=[ice]).save(str(tmp_path / "ice"))
    (ice_again,) = PipelineModel.load(str(tmp_path / "ice")).stages
    assert ice_again.getNumericFeatures() == [json.dumps(setting)]
    (row,) = ice_again.transform(ice_rows).collect()
    assert sorted(row["x_dependence"]) == pytest.approx(np.linspace(0, 2, 11))


def _same(got, expected) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.asDict().keys() == e.asDict().keys()
        for key, value in e.asDict().items():
            other = g[key]
            if isinstance(value, list) and value and hasattr(value[0], "toArray"):
                for a, b in zip(other, value, strict=True):
                    np.testing.assert_allclose(a.toArray(), b.toArray(), atol=1e-9)
            elif isinstance(value, dict):
                assert set(other) == set(value)
                for k in value:
                    np.testing.assert_allclose(other[k].toArray(), value[k].toArray(), atol=1e-9)
            elif hasattr(value, "toArray"):
                np.testing.assert_allclose(other.toArray(), value.toArray(), atol=1e-9)
            else:
                assert other == value


@pytest.mark.parametrize("backend", BACKENDS)
def test_misuse_fails_before_any_job_naming_the_problem(spark, sentiment, ice_data, backend):
    model, _ = sentiment
    rows = spark.createDataFrame([(ROW, 1)], "text string, n int")
    with pytest.raises(Exception, match="'inputCol' must name the text column"):
        TextSHAP(model=model).setBackend(backend).transform(rows)
    with pytest.raises(Exception, match="'n' must be string but was int"):
        TextLIME(inputCol="n", model=model).setBackend(backend).transform(rows)
    with pytest.raises(Exception, match="output column 'text' already exists"):
        TextLIME(inputCol="text", model=model, tokensCol="text").setBackend(backend).transform(rows)
    with pytest.raises(Exception, match="param 'model' must be set"):
        TextSHAP(inputCol="text").setBackend(backend).transform(rows)
    with pytest.raises(ValueError, match="samplingFraction"):
        TextLIME(samplingFraction=1.5)
    ice_rows, ice_model = ice_data
    with pytest.raises(Exception, match="no features"):
        _ice(backend, ice_model).transform(ice_rows)
    with pytest.raises(Exception, match="unknown key"):
        _ice(backend, ice_model, numericFeatures=[{"name": "x", "numTop": 3}]).transform(ice_rows)
    with pytest.raises(Exception, match="must be numeric .a numeric feature. but was string"):
        _ice(backend, ice_model, numericFeatures=["c"]).transform(ice_rows)
    with pytest.raises(Exception, match="must be a string, boolean or integer"):
        _ice(backend, ice_model, categoricalFeatures=["x"]).transform(ice_rows)
    with pytest.raises(Exception, match="rangeMin 3.0 above rangeMax 1.0"):
        _ice(
            backend, ice_model, numericFeatures=[{"name": "x", "rangeMin": 3, "rangeMax": 1}]
        ).transform(ice_rows)
    with pytest.raises(Exception, match="repeat x"):
        _ice(backend, ice_model, numericFeatures=["x", "x"]).transform(ice_rows)
    with pytest.raises(ValueError, match="kind"):
        ICETransformer(kind="both")
