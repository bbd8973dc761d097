"""The featurization stages (CleanMissingData, ValueIndexer, IndexToValue, SummarizeData) on both
backends: each against numpy (and scikit-learn's SimpleImputer), the JVM stage and its Python
twin compared in params, schema (metadata included), rows and error text; save/load across the
backends and a Pipeline round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import IndexToString
from pyspark.sql import types as T
from sklearn.impute import SimpleImputer
from test_python_stages import assert_fails_alike, assert_same, pair

import mmlspark
from mmlspark.featurize import (
    CleanMissingData,
    CleanMissingDataModel,
    IndexToValue,
    SummarizeData,
    ValueIndexer,
)

NAN = float("nan")
A = [1.0, None, 3.0, NAN, 6.0, 2.5]
B = [1, 2, None, 4, 6, None]
S = ["x", None, "y", "z", None, "x"]


@pytest.fixture(scope="module")
def gaps(spark):
    schema = "id int, a double, b int, s string"
    rows = list(zip(range(len(A)), A, B, S, strict=True))
    return spark.createDataFrame(rows, schema)


def _present(values):
    return np.array(
        [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    )


def _by_id(df, column):
    return {r["id"]: r[column] for r in df.collect()}


def _lower_median(values):
    """The approximate median with Spark's default accuracy on a few values: the smallest value
    with at least half of them at or below it."""
    return float(np.quantile(_present(values), 0.5, method="inverted_cdf"))


# -- CleanMissingData ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Mean", "Median"])
def test_clean_missing_data_fills_like_numpy_on_both_backends(gaps, mode):
    jvm, python = pair(
        CleanMissingData(inputCols=["a", "b"], outputCols=["a2", "b2"], cleaningMode=mode)
    )
    jvm_model, py_model = jvm.fit(gaps), python.fit(gaps)
    assert py_model.getBackend() == "python" and py_model.uid == jvm_model.uid == jvm.uid
    assert py_model.getFillValues() == jvm_model.getFillValues()
    out = assert_same(jvm_model.transform(gaps), py_model.transform(gaps))
    if mode == "Mean":
        # NaN counts as missing, as null does: scikit-learn's imputer with NaN for both
        imputer = SimpleImputer(strategy="mean").fit(
            np.array([[NAN if v is None else v for v in A], [NAN if v is None else v for v in B]]).T
        )
        fill_a, fill_b = imputer.statistics_
    else:
        fill_a, fill_b = _lower_median(A), _lower_median(B)
    got = {r["id"]: (r["a2"], r["b2"]) for r in out}
    for i, (a, b) in enumerate(zip(A, B, strict=True)):
        want_a = fill_a if a is None or math.isnan(a) else a
        want_b = int(fill_b) if b is None else b  # a mean truncated in an int column
        assert math.isclose(got[i][0], want_a, rel_tol=1e-12) and got[i][1] == want_b


def test_clean_missing_data_custom_and_in_place(gaps):
    jvm, python = pair(
        CleanMissingData(inputCols=["s", "b"], cleaningMode="Custom", customValue="7")
    )
    out = assert_same(jvm.fit(gaps).transform(gaps), python.fit(gaps).transform(gaps))
    assert [r["s"] for r in sorted(out)] == [v if v is not None else "7" for v in S]
    assert [r["b"] for r in sorted(out)] == [v if v is not None else 7 for v in B]


def test_clean_missing_data_misuse_fails_alike(gaps):
    cases = [
        dict(inputCols=["a", "b"], outputCols=["x"]),
        dict(inputCols=["nope"], outputCols=["x"]),
        dict(inputCols=["s"]),
        dict(inputCols=["s"], cleaningMode="Custom"),
        dict(outputCols=["x"]),
    ]
    messages = []
    for params in cases:
        jvm, python = pair(CleanMissingData(**params))
        messages.append(assert_fails_alike(lambda j=jvm: j.fit(gaps), lambda p=python: p.fit(gaps)))
    assert "2 inputCols but 1 outputCols" in messages[0]
    assert "'nope' does not exist" in messages[1]
    assert "'s' must be a numeric type but was string" in messages[2]
    jvm, python = pair(CleanMissingData(inputCols=["a"]))
    empty = gaps.where("id = 1")
    message = assert_fails_alike(lambda: jvm.fit(empty), lambda: python.fit(empty))
    assert "column 'a' has no non-missing value to take the mean of" in message


def test_clean_missing_data_models_save_and_load_across_backends(gaps, tmp_path):
    stage = CleanMissingData(inputCols=["a"], outputCols=["a2"], cleaningMode="Median")
    jvm_model = stage.fit(gaps)
    expected = _by_id(jvm_model.transform(gaps), "a2")
    py_model = stage.copy().setBackend("python").fit(gaps)
    py_model.write().save(str(tmp_path / "python"))
    loaded = CleanMissingDataModel.load(str(tmp_path / "python"))  # on the JVM
    assert loaded.getBackend() == "jvm" and loaded.getFillValues() == ["2.5"]
    assert _by_id(loaded.transform(gaps), "a2") == expected
    jvm_model.write().save(str(tmp_path / "jvm"))
    mmlspark.set_backend("python")
    try:
        back = CleanMissingDataModel.load(str(tmp_path / "jvm"))
        assert back.getBackend() == "python"
        assert _by_id(back.transform(gaps), "a2") == expected
    finally:
        mmlspark.set_backend(None)


def test_a_pipeline_of_the_stages_round_trips(gaps, tmp_path):
    pipeline = Pipeline(
        stages=[
            CleanMissingData(inputCols=["s"], cleaningMode="Custom", customValue="none"),
            ValueIndexer(inputCol="s", outputCol="si"),
            IndexToValue(inputCol="si", outputCol="back"),
        ]
    )
    model = pipeline.fit(gaps)
    model.write().save(str(tmp_path / "pipeline"))
    loaded = PipelineModel.load(str(tmp_path / "pipeline"))
    out = loaded.transform(gaps).collect()
    assert_same(model.transform(gaps), loaded.transform(gaps))
    levels = sorted({v if v is not None else "none" for v in S})
    for r in out:
        assert r["si"] == levels.index(r["s"]) and r["back"] == r["s"]


# -- ValueIndexer and IndexToValue -----------------------------------------------------------------


@pytest.mark.parametrize("column", ["s", "b", "a"])
def test_value_indexer_indexes_sorted_levels_on_both_backends(gaps, column):
    values = {"s": S, "b": B, "a": A}[column]
    present = _present(values).tolist()
    levels = sorted(set(present))
    jvm, python = pair(ValueIndexer(inputCol=column, outputCol="i"))
    jvm_model, py_model = jvm.fit(gaps), python.fit(gaps)
    assert py_model.getLevels() == jvm_model.getLevels()
    assert [type(present[0])(v) for v in jvm_model.getLevels()] == levels
    assert py_model.getHasNullLevel() and jvm_model.getHasNullLevel()
    assert py_model.getDataType() == jvm_model.getDataType()
    out = assert_same(jvm_model.transform(gaps), py_model.transform(gaps))
    missing = len(levels)  # null and NaN index after the levels
    for r in out:
        v = values[r["id"]]
        assert r["i"] == (missing if v not in levels else levels.index(v))
    # the nominal attribute Spark's IndexToString reads
    named = IndexToString(inputCol="i", outputCol="name").transform(
        py_model.transform(gaps).where(f"i < {missing}")
    )
    assert all(
        r["name"] == str(r[column]) or float(r["name"]) == r[column] for r in named.collect()
    )
    # and IndexToValue gives back the typed values, null where the index names no level
    jvm_back, py_back = pair(IndexToValue(inputCol="i", outputCol="back"))
    indexed = jvm_model.transform(gaps)
    back = assert_same(jvm_back.transform(indexed), py_back.transform(indexed))
    assert py_back.transform(indexed).schema["back"].dataType == gaps.schema[column].dataType
    for r in back:
        assert r["back"] == (None if r["i"] == missing else r[column])


def test_unseen_values_index_after_missing_ones(spark, gaps):
    unseen = spark.createDataFrame(
        [(0, "zz", 0.0, None, None)], "id int, s string, a double, b int, x int"
    )
    for backend in ("jvm", "python"):
        model = ValueIndexer(inputCol="s", outputCol="i").setBackend(backend).fit(gaps)
        assert model.transform(unseen).head()["i"] == 4  # 3 levels, null at 3


def test_value_indexer_misuse_fails_alike(spark, gaps):
    nested = spark.createDataFrame([([1],)], "arr array<int>")
    jvm, python = pair(ValueIndexer(inputCol="arr", outputCol="i"))
    message = assert_fails_alike(lambda: jvm.fit(nested), lambda: python.fit(nested))
    assert "'arr' must be a string, boolean or numeric type but was array<int>" in message
    jvm, python = pair(ValueIndexer(inputCol="s", outputCol="a"))
    assert "'a' already exists" in assert_fails_alike(
        lambda: jvm.fit(gaps), lambda: python.fit(gaps)
    )
    jvm, python = pair(IndexToValue(inputCol="id", outputCol="v"))
    message = assert_fails_alike(lambda: jvm.transform(gaps), lambda: python.transform(gaps))
    assert "column 'id' carries no levels in its metadata" in message


# -- SummarizeData ---------------------------------------------------------------------------------


def test_summarize_data_agrees_with_numpy_on_both_backends(gaps):
    jvm, python = pair(SummarizeData())
    out = {
        r["Feature"]: r
        for r in assert_same(jvm.transform(gaps), python.transform(gaps), exact=False)
    }
    assert list(out) == ["id", "a", "b", "s"] or set(out) == {"id", "a", "b", "s"}
    b = _present(B).astype(float)
    row = out["b"]
    assert (row["Count"], row["Missing_Value_Count"], row["Unique_Value_Count"]) == (4.0, 2.0, 4.0)
    quantiles = np.quantile(b, [0, 0.25, 0.5, 0.75, 1, 0.005, 0.95], method="inverted_cdf")
    names = ["Min", "1st_Quartile", "Median", "3rd_Quartile", "Max", "P0_5", "P95"]
    assert [row[n] for n in names] == quantiles.tolist()
    centred = b - b.mean()
    m2, m3, m4 = (np.mean(centred**k) for k in (2, 3, 4))
    assert math.isclose(row["Sample_Variance"], np.var(b, ddof=1), rel_tol=1e-12)
    assert math.isclose(row["Sample_Standard_Deviation"], np.std(b, ddof=1), rel_tol=1e-12)
    assert math.isclose(row["Sample_Skewness"], m3 / m2**1.5, rel_tol=1e-9)
    assert math.isclose(row["Sample_Kurtosis"], m4 / m2**2 - 3, rel_tol=1e-9)
    # NaN is missing for the counts; a string column has counts only
    assert out["a"]["Missing_Value_Count"] == 2.0 and out["a"]["Count"] == 4.0
    assert out["s"]["Unique_Value_Count"] == 3.0 and math.isnan(out["s"]["Median"])
    only_counts = dict(basic=False, sample=False, percentiles=False)
    jvm, python = pair(SummarizeData(**only_counts))
    small = assert_same(jvm.transform(gaps), python.transform(gaps))
    assert list(small[0].asDict()) == [
        "Feature",
        "Count",
        "Unique_Value_Count",
        "Missing_Value_Count",
    ]
    assert python.transform(gaps).schema == jvm.transform(gaps).schema
    assert isinstance(python.transform(gaps).schema["Count"].dataType, T.DoubleType)
