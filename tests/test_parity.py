"""The Python wrappers and the JVM stages agree: names, docs, defaults, and behaviour."""

from __future__ import annotations

import inspect
import json

import onnx_models
import pytest
from conftest import generated_classes
from pyspark.ml import Pipeline, PipelineModel, Transformer
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.regression import LinearRegression
from pyspark.ml.wrapper import JavaParams
from pyspark.sql import DataFrame
from pyspark.testing import assertDataFrameEqual

from mmlspark.core.jvm import jvm_class
from mmlspark.stages import ClassBalancer, EnsembleByKey, SelectColumns

CLASSES = generated_classes()


def jvm_stage(spark, class_name: str):
    return jvm_class(spark._jvm, class_name)()


def py_value(value):
    if value is not None and hasattr(value, "__iter__") and not isinstance(value, str):
        return list(value)
    return value


def test_every_jvm_stage_has_a_python_wrapper(spark):
    jvm_names = set(spark._jvm.mmlspark.core.Stages.names())
    assert jvm_names, "the JVM found no stages"
    assert jvm_names == {cls._java_class_name for cls in CLASSES}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_params_docs_and_defaults_match_the_jvm(spark, cls):
    py = cls()
    jvm = jvm_stage(spark, cls._java_class_name)
    jvm_params = {p.name(): p for p in jvm.params()}
    assert {p.name for p in py.params} == set(jvm_params)
    for param in py.params:
        java_param = jvm_params[param.name]
        assert param.doc == java_param.doc()
        assert py.hasDefault(param) == jvm.hasDefault(java_param)
        if jvm.hasDefault(java_param):
            assert py.getOrDefault(param) == py_value(jvm.getDefault(java_param).get())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_constructor_is_keyword_only_and_typed(spark, cls):
    signature = inspect.signature(cls.__init__)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    # SynapseML's names for params, where a class takes them, are keywords too.
    aliases = getattr(cls, "_ALIASES", {})
    assert {p.name for p in params} == {p.name for p in cls().params} | set(aliases)
    assert set(aliases.values()) <= {p.name for p in cls().params}
    assert all(p.annotation is not inspect.Parameter.empty for p in params)
    assert cls.__doc__ and cls._java_class_name in cls.__doc__


# Values tried, in order, for a param with no default (the first the stage accepts is kept), by
# the param's type; a param that names a file gets a real one (see `model_file`).
_SAMPLES = {
    "toString": ["id", "features"],
    "toInt": [3],
    "toFloat": [0.5],
    "toBoolean": [True],
    "toListString": [["id", "key"]],
    "toListInt": [[1, 2]],
    "toListFloat": [[0.25, 0.5]],
    "to_stage": [
        lambda: LogisticRegression(maxIter=3),
        lambda: LinearRegression(maxIter=3),
        lambda: SelectColumns(cols=["id"]),
    ],
    "to_stages": [lambda: [SelectColumns(cols=["id"])]],
}

# Stages that cannot be built without fitting, and why; the test checks that saving one built
# without fitting does fail, so an entry cannot outlive its reason.
_NEEDS_FITTING = {
    "BestModel": "holds the candidates' metrics and ROC curve, which FindBestModel.fit computes",
}


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("model") / "model.onnx"
    path.write_bytes(onnx_models.two_in_two_out())
    return str(path)


def _python_built(cls, model_file: str):
    """`cls` built in Python with every param set: to its default, or without one to the first
    sample value its JVM rule accepts."""
    stage = cls()
    for param in stage.params:
        if stage.hasDefault(param):
            stage._set(**{param.name: stage.getOrDefault(param)})
            continue
        if param.name == "modelLocation":
            stage._set(modelLocation=model_file)
            continue
        for sample in _SAMPLES.get(param.typeConverter.__name__, []):
            try:
                stage._set(**{param.name: sample() if callable(sample) else sample})
                break
            except (ValueError, TypeError):
                continue
    return stage


def _java_value(spark, java_param, value):
    """`value` as the JVM param's own type (py4j alone maps lists to java.util.List and small
    numbers to Integer)."""
    gateway, jvm = spark.sparkContext._gateway, spark._jvm
    kind = java_param.getClass().getSimpleName()
    arrays = {
        "StringArrayParam": jvm.java.lang.String,
        "IntArrayParam": gateway.jvm.int,
        "DoubleArrayParam": gateway.jvm.double,
    }
    if kind == "StageParam":
        return value._to_java()
    if kind == "StageArrayParam":
        stages = gateway.new_array(jvm.org.apache.spark.ml.PipelineStage, len(value))
        for i, stage in enumerate(value):
            stages[i] = stage._to_java()
        return stages
    if kind in arrays:
        array = gateway.new_array(arrays[kind], len(value))
        for i, item in enumerate(value):
            array[i] = item
        return array
    if kind == "DoubleParam":
        return float(value)
    return value


def _scala_built(spark, stage):
    """The same stage built through its Scala API directly (the `setX` methods), with the same uid,
    param by param."""
    jvm = jvm_class(spark._jvm, stage._java_class_name)(stage.uid)
    for param, value in stage._paramMap.items():
        java_param = jvm.getParam(param.name)
        setter = getattr(jvm, "set" + param.name[0].upper() + param.name[1:])
        setter(_java_value(spark, java_param, value))
    return jvm


def _metadata(path) -> dict:
    """What `save` wrote about the stage, less the time it was written."""
    (part,) = (path / "metadata").glob("part-*")
    metadata = json.loads(part.read_text())
    metadata.pop("timestamp")
    return metadata


def _comparable(value):
    """A param value compared by what it is: a stage by class, uid and params."""
    if isinstance(value, JavaParams):
        return (type(value).__name__, value.uid, _comparable(value.extractParamMap()))
    if isinstance(value, dict):
        return sorted((p.name, _comparable(v)) for p, v in value.items())
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def _same_params(expected, actual):
    assert type(actual) is type(expected) and actual.uid == expected.uid
    for param in expected.params:
        assert actual.isSet(param.name) == expected.isSet(param), param.name
        assert actual.isDefined(param.name) == expected.isDefined(param), param.name
        if expected.isDefined(param):
            got, want = actual.getOrDefault(param.name), expected.getOrDefault(param)
            assert _comparable(got) == _comparable(want), param.name


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_python_built_stage_equals_scala_built_after_save_and_load(
    spark, tmp_path, cls, model_file
):
    stage = _python_built(cls, model_file)
    if cls.__name__ in _NEEDS_FITTING:
        with pytest.raises(Exception):  # noqa: B017 - whatever the JVM writer raises
            stage.save(str(tmp_path / "py"))
        return
    stage.save(str(tmp_path / "py"))
    _scala_built(spark, stage).save(str(tmp_path / "jvm"))
    assert _metadata(tmp_path / "py") == _metadata(tmp_path / "jvm")
    _same_params(stage, cls.load(str(tmp_path / "py")))
    _same_params(stage, cls.load(str(tmp_path / "jvm")))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_stage_round_trips_inside_a_pipeline_and_a_pipeline_model(spark, tmp_path, cls, model_file):
    stage = _python_built(cls, model_file)
    if cls.__name__ in _NEEDS_FITTING:  # its fitted round trip: PipelineRoundTripSuite (Scala)
        with pytest.raises(Exception):  # noqa: B017 - whatever the JVM writer raises
            Pipeline(stages=[stage]).save(str(tmp_path / "pipeline"))
        return
    Pipeline(stages=[stage]).save(str(tmp_path / "pipeline"))
    (loaded,) = Pipeline.load(str(tmp_path / "pipeline")).getStages()
    _same_params(stage, loaded)
    if isinstance(stage, Transformer):
        PipelineModel(stages=[stage]).save(str(tmp_path / "model"))
        (loaded,) = PipelineModel.load(str(tmp_path / "model")).stages
        _same_params(stage, loaded)


def test_python_built_stage_transforms_like_scala_built(spark, tmp_path):
    """Beyond params: a Python-built stage and its Scala-built twin give the same rows."""
    df = spark.createDataFrame(
        [(i, f"k{i % 2}", i * 0.25) for i in range(9)], "id long, key string, score double"
    ).coalesce(1)
    stage = EnsembleByKey(keys=["key"], cols=["score"], colNames=["avg"])
    scala = _scala_built(spark, stage)
    stage.save(str(tmp_path / "py"))
    from_py = EnsembleByKey.load(str(tmp_path / "py"))
    assertDataFrameEqual(from_py.transform(df), DataFrame(scala.transform(df._jdf), spark))
    balancer = ClassBalancer(inputCol="key", outputCol="w")
    expected = DataFrame(_scala_built(spark, balancer).fit(df._jdf).transform(df._jdf), spark)
    assertDataFrameEqual(balancer.fit(df).transform(df), expected)
    assert isinstance(JavaParams._from_java(scala), EnsembleByKey)
