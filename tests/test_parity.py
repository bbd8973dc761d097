"""The Python wrappers and the JVM stages agree: names, docs, defaults, and behaviour."""

from __future__ import annotations

import inspect

import pytest
from conftest import generated_classes
from pyspark.ml.wrapper import JavaParams

from mmlspark.stages import (
    ClassBalancer,
    DropColumns,
    EnsembleByKey,
    MiniBatchTransformer,
    RenameColumn,
    SelectColumns,
)

CLASSES = generated_classes()


def jvm_stage(spark, class_name: str):
    obj = spark._jvm
    for part in class_name.split("."):
        obj = getattr(obj, part)
    return obj()


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
    assert {p.name for p in params} == {p.name for p in cls().params}
    assert all(p.annotation is not inspect.Parameter.empty for p in params)
    assert cls.__doc__ and cls._java_class_name in cls.__doc__


def _python_built():
    return [
        SelectColumns(cols=["score", "id"]),
        DropColumns(cols=["key"]),
        RenameColumn(inputCol="key", outputCol="group"),
        MiniBatchTransformer(miniBatchSize=3),
        EnsembleByKey(keys=["key"], cols=["score"], colNames=["avg"]),
        ClassBalancer(inputCol="key", outputCol="w"),
    ]


def _to_java(spark, value):
    if isinstance(value, list):
        array = spark.sparkContext._gateway.new_array(spark._jvm.java.lang.String, len(value))
        for i, item in enumerate(value):
            array[i] = item
        return array
    return value


def _scala_built(spark, stage):
    """The same stage built through the JVM API directly, param by param."""
    jvm = jvm_stage(spark, stage._java_class_name)
    for param, value in stage._paramMap.items():
        jvm.set(jvm.getParam(param.name), _to_java(spark, value))
    return jvm


def _rows(java_df) -> list[str]:
    return sorted(str(row) for row in java_df.collectAsList())


def test_python_built_stage_equals_scala_built_after_save_and_load(spark, tmp_path):
    df = spark.createDataFrame(
        [(i, f"k{i % 2}", i * 0.25) for i in range(9)], "id long, key string, score double"
    ).coalesce(1)
    for i, stage in enumerate(_python_built()):
        scala = _scala_built(spark, stage)
        stage.save(str(tmp_path / f"py{i}"))
        scala.save(str(tmp_path / f"jvm{i}"))
        from_py = type(stage).load(str(tmp_path / f"py{i}"))
        from_jvm = type(stage).load(str(tmp_path / f"jvm{i}"))
        assert type(from_py) is type(stage) and type(from_jvm) is type(stage)
        for param in stage.params:
            assert from_py.isSet(param.name) == from_jvm.isSet(param.name) == stage.isSet(param)
            assert from_py.getOrDefault(param.name) == from_jvm.getOrDefault(param.name)
        if isinstance(stage, ClassBalancer):
            scala_out = scala.fit(df._jdf).transform(df._jdf)
            py_out = from_py.fit(df).transform(df)
        else:
            scala_out = scala.transform(df._jdf)
            py_out = from_py.transform(df)
        assert _rows(py_out._jdf) == _rows(scala_out)
        assert isinstance(JavaParams._from_java(scala), type(stage))
