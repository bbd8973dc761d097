"""UDFTransformer and Lambda (Python-only stages holding Python functions) and MultiColumnAdapter
(JVM and Python backends), checked against plain pyspark, pandas and hand-worked values, with
save/load, Pipeline round trips, Spark Connect without the jar, and misuse."""

from __future__ import annotations

import pickle
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import StringIndexer, VectorAssembler
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.stages import Lambda, MultiColumnAdapter, SelectColumns, UDFTransformer

ROWS = [(1, 0.5, "ant"), (2, 1.5, "bee"), (3, -2.0, "cat"), (4, 0.0, "bee")]


@pytest.fixture
def frame(spark):
    return spark.createDataFrame(ROWS, "x long, y double, s string")


def _col(df, name, key="x"):
    return [r[name] for r in df.orderBy(key).collect()]


def test_udf_over_one_column_and_replacing_an_existing_one(frame):
    square = UDFTransformer(inputCol="x", outputCol="x2").setUDF(F.udf(lambda v: v * v, "long"))
    out = square.transform(frame)
    assert out.columns == ["x", "y", "s", "x2"]
    assert _col(out, "x2") == [x * x for x, _, _ in ROWS]
    assert out.schema == square.transformSchema(frame.schema)
    # An existing output column is replaced in place (withColumn), as SynapseML's transform does.
    upper = UDFTransformer(inputCol="s", outputCol="s").setUDF(F.udf(str.upper, "string"))
    replaced = upper.transform(frame)
    assert replaced.columns == ["x", "y", "s"]
    assert _col(replaced, "s") == [s.upper() for _, _, s in ROWS]
    assert UDFTransformer().getOutputCol().endswith("_output")


def test_pandas_udf_over_several_columns_against_pandas(frame):
    weighted = F.pandas_udf(lambda a, b: a + 2 * b, "double")
    stage = UDFTransformer(inputCols=["x", "y"], outputCol="w", udf=weighted)
    got = _col(stage.transform(frame), "w")
    expected = pd.DataFrame(ROWS, columns=["x", "y", "s"]).eval("x + 2 * y").tolist()
    assert got == expected


def test_sql_functions_built_in_and_registered(spark, frame):
    upper = UDFTransformer(inputCol="s", outputCol="S", sqlFunction="upper")
    assert _col(upper.transform(frame), "S") == [s.upper() for _, _, s in ROWS]
    assert upper.transformSchema(frame.schema)["S"].dataType == T.StringType()
    spark.udf.register("mml_times_ten", lambda v: v * 10, "long")
    ten = UDFTransformer(inputCol="x", outputCol="t").setSqlFunction("mml_times_ten")
    assert _col(ten.transform(frame), "t") == [10 * x for x, _, _ in ROWS]
    assert not ten.isSet(ten.udf) and ten.setUDF(F.udf(abs, "long")).isSet(ten.udf)
    assert not ten.isSet(ten.sqlFunction)  # one function at a time


def test_save_load_and_pipeline_round_trip(spark, frame, tmp_path):
    offset = 7  # a closure's value travels in the pickle
    udf_stage = UDFTransformer(
        inputCol="x", outputCol="x7", udf=F.udf(lambda v: v + offset, "long")
    )
    sql_stage = UDFTransformer(inputCol="s", outputCol="n", sqlFunction="length")
    for stage in (udf_stage, sql_stage):
        stage.save(str(tmp_path / stage.uid))
        loaded = UDFTransformer.load(str(tmp_path / stage.uid))
        assert loaded.uid == stage.uid and loaded.getOutputCol() == stage.getOutputCol()
        assert loaded.transform(frame).collect() == stage.transform(frame).collect()
    with pytest.raises(OSError, match="already exists"):
        udf_stage.save(str(tmp_path / udf_stage.uid))
    udf_stage.write().overwrite().save(str(tmp_path / udf_stage.uid))

    # Beside a JVM stage in one pipeline, saved and loaded by pyspark's own writer and reader.
    evens = Lambda.apply(lambda df: df.where(F.col("x") % 2 == 0))
    pipeline = Pipeline(stages=[udf_stage, evens, SelectColumns(cols=["x7", "s"])])
    model = pipeline.fit(frame)
    model.save(str(tmp_path / "model"))
    again = PipelineModel.load(str(tmp_path / "model"))
    assert [type(s).__name__ for s in again.stages] == ["UDFTransformer", "Lambda", "SelectColumns"]
    expected = [(x + 7, s) for x, _, s in ROWS if x % 2 == 0]
    assert sorted(tuple(r) for r in again.transform(frame).collect()) == expected
    pipeline.save(str(tmp_path / "pipeline"))
    assert len(Pipeline.load(str(tmp_path / "pipeline")).getStages()) == 3


def test_a_relative_path_is_the_jvm_s_as_for_spark_s_writers(spark, frame, tmp_path, monkeypatch):
    """pyspark's Pipeline writer puts a pipeline's metadata under the JVM's working folder; the
    stage's own files go there too, though Python's working folder has moved."""
    jvm_dir = spark.sparkContext._jvm.java.lang.System.getProperty("user.dir")
    relative = f"udf-stages-{tmp_path.name}"
    monkeypatch.chdir(tmp_path)
    stage = UDFTransformer(inputCol="x", outputCol="n", udf=F.udf(lambda v: -v, "long"))
    try:
        PipelineModel(stages=[stage, SelectColumns(cols=["n"])]).save(relative)
        loaded = PipelineModel.load(relative)
        assert sorted(r.n for r in loaded.transform(frame).collect()) == sorted(
            -x for x, _, _ in ROWS
        )
        assert (Path(jvm_dir) / relative / "stages").is_dir() and not Path(relative).exists()
    finally:
        shutil.rmtree(Path(jvm_dir) / relative, ignore_errors=True)


def test_lambda_transform_schema_and_persistence(spark, frame, tmp_path):
    def scaled(df):
        return df.select("x", (F.col("y") * 3).alias("y3"))

    stage = Lambda(transformFunc=scaled)
    out = stage.transform(frame)
    assert sorted(tuple(r) for r in out.collect()) == sorted((x, y * 3) for x, y, _ in ROWS)
    # Without transformSchemaFunc: the function run on an empty DataFrame of the schema.
    assert stage.transformSchema(frame.schema) == out.schema
    stage.setTransformSchema(lambda schema: T.StructType(schema.fields[:1]))
    assert stage.transformSchema(frame.schema).fieldNames() == ["x"]
    stage.save(str(tmp_path / "lambda"))
    loaded = Lambda.load(str(tmp_path / "lambda"))
    assert loaded.transformSchema(frame.schema).fieldNames() == ["x"]
    assert sorted(loaded.transform(frame).collect()) == sorted(out.collect())


def test_on_spark_connect_without_the_jar(jarless_connect, tmp_path):
    from conftest import connect_mode

    with connect_mode():
        df = jarless_connect.createDataFrame(ROWS, "x long, y double, s string")
        stage = UDFTransformer(inputCols=["x", "y"], outputCol="p").setUDF(
            F.pandas_udf(lambda a, b: a * b, "double")
        )
        model = Pipeline(stages=[stage, Lambda.apply(lambda d: d.where("p > 0"))]).fit(df)
        positive = sorted(x * y for x, y, _ in ROWS if x * y > 0)
        assert sorted(r.p for r in model.transform(df).collect()) == positive
        model.save(str(tmp_path / "model"))
        loaded = PipelineModel.load(str(tmp_path / "model"))
        assert [type(s).__name__ for s in loaded.stages] == ["UDFTransformer", "Lambda"]
        assert sorted(r.p for r in loaded.transform(df).collect()) == positive
        upper = UDFTransformer(inputCol="s", sqlFunction="upper")
        out = upper.transform(df).collect()
        assert {r[upper.getOutputCol()] for r in out} == {"ANT", "BEE", "CAT"}
        # MultiColumnAdapter runs on the Python backend here, fitting Spark's own stage.
        adapter = MultiColumnAdapter(
            baseStage=StringIndexer(stringOrderType="alphabetAsc"),
            inputCols=["s"],
            outputCols=["si"],
        )
        assert adapter.getBackend() == "python"
        fitted = adapter.fit(df).transform(df).orderBy("x").collect()
        assert [r.si for r in fitted] == _alphabetical([s for _, _, s in ROWS])


def test_misuse_says_what_is_wrong(spark, frame, tmp_path):
    stage = UDFTransformer(inputCol="x")
    with pytest.raises(ValueError, match="set inputCol or inputCols, not both"):
        stage.setInputCols(["x", "y"])
    with pytest.raises(ValueError, match="no function: set udf"):
        stage.transform(frame)
    with pytest.raises(TypeError, match="expected a pyspark UDF .* got function"):
        stage.setUDF(lambda v: v)

    @F.pandas_udf("double")
    def total(v: pd.Series) -> float:
        return float(v.sum())

    with pytest.raises(TypeError, match="gives no value per row"):
        stage.setUDF(total)  # a grouped aggregate
    with pytest.raises(ValueError, match="input column 'nope' does not exist"):
        UDFTransformer(inputCol="nope", sqlFunction="upper").transform(frame)
    with pytest.raises(ValueError, match="param 'inputCol' or 'inputCols' must be set"):
        UDFTransformer(sqlFunction="upper").transform(frame)
    lock = threading.Lock()
    locked = UDFTransformer(inputCol="x", udf=F.udf(lambda v: lock.locked() or v, "long"))
    with pytest.raises(ValueError, match="cannot be saved: cloudpickle cannot pickle it"):
        locked.save(str(tmp_path / "locked"))
    assert not (tmp_path / "locked").exists()
    with pytest.raises(ValueError, match="param 'transformFunc' must be set"):
        Lambda().transform(frame)
    with pytest.raises(ValueError, match="must return a DataFrame but returned int"):
        Lambda.apply(lambda df: df.count()).transform(frame)
    with pytest.raises(ValueError, match="transformFunc must be a function, got str"):
        Lambda().setTransform("df.where(x > 1)")
    # A pickle of another Python is refused, naming both versions.
    saved = tmp_path / "other-python"
    UDFTransformer(inputCol="x", udf=F.udf(abs, "long")).save(str(saved))
    payload = pickle.loads((saved / "functions.pkl").read_bytes())
    (saved / "functions.pkl").write_bytes(pickle.dumps({**payload, "python": "2.7"}))
    with pytest.raises(ValueError, match="pickled by Python 2.7 and this is Python 3"):
        UDFTransformer.load(str(saved))


# ---------------------------------------------------------------------------------------------
# MultiColumnAdapter


@pytest.fixture
def words(spark):
    rows = [("b", "x"), ("a", "y"), ("c", "x"), ("a", "z"), ("b", "y")]
    return spark.createDataFrame(rows, "k string, m string")


def _alphabetical(values):
    levels = sorted(set(values))
    return [float(levels.index(v)) for v in values]


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_multi_column_adapter_fits_one_copy_per_pair(words, tmp_path, backend):
    base = StringIndexer(stringOrderType="alphabetAsc")
    adapter = MultiColumnAdapter(baseStage=base, inputCols=["k", "m"], outputCols=["ki", "mi"])
    adapter.setBackend(backend)
    model = adapter.fit(words)
    assert isinstance(model, PipelineModel) and len(model.stages) == 2
    assert [(s.getInputCol(), s.getOutputCol()) for s in model.stages] == [
        ("k", "ki"),
        ("m", "mi"),
    ]
    assert not base.isSet(base.inputCol)  # the base stage is left as it was
    local = words.toPandas()
    out = model.transform(words).toPandas()
    assert out["ki"].tolist() == _alphabetical(local["k"].tolist())
    assert out["mi"].tolist() == _alphabetical(local["m"].tolist())
    adapter.save(str(tmp_path / "adapter"))
    loaded = MultiColumnAdapter.load(str(tmp_path / "adapter"))
    assert loaded.getInputCols() == ["k", "m"] and loaded.getOutputCols() == ["ki", "mi"]
    refit = loaded.fit(words).transform(words).toPandas()
    assert refit[["ki", "mi"]].equals(out[["ki", "mi"]])
    model.save(str(tmp_path / "model"))
    assert PipelineModel.load(str(tmp_path / "model")).transform(words).toPandas().equals(out)


#: (the params, made in the test where a session is running, and the message they fail with).
MISUSE = [
    (lambda: dict(inputCols=["k"], outputCols=["ki"]), "param 'baseStage' must be set"),
    (
        lambda: dict(baseStage=StringIndexer(), inputCols=["k", "m"], outputCols=["ki"]),
        "2 inputCols but 1",
    ),
    (
        lambda: dict(baseStage=StringIndexer(), inputCols=["k"]),
        "'inputCols' and 'outputCols' must be set",
    ),
    (
        lambda: dict(baseStage=VectorAssembler(), inputCols=["k"], outputCols=["v"]),
        "baseStage VectorAssembler must have the params inputCol and outputCol",
    ),
    (
        lambda: dict(baseStage=StringIndexer(), inputCols=["k"], outputCols=["m"]),
        "'m' already exists",
    ),
    (
        lambda: dict(baseStage=StringIndexer(), inputCols=["q"], outputCols=["qi"]),
        "'q' does not exist",
    ),
]


@pytest.mark.parametrize(("params", "message"), MISUSE, ids=[m for _, m in MISUSE])
def test_multi_column_adapter_misuse_fails_alike_on_both_backends(words, params, message):
    for backend in ("jvm", "python"):
        adapter = MultiColumnAdapter(**params()).setBackend(backend)
        with pytest.raises(Exception, match=message) as error:
            adapter.fit(words)
        assert f"MultiColumnAdapter {adapter.uid}" in str(error.value), backend
