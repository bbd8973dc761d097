"""The params' validators hold alike on both backends. They are written once, in the param tables
(project/*ParamsSpec.scala) as ``mmlspark.contracts.Check``, and the code generator writes their
Python twins into the wrappers (``_python_param_checks``), which apply them wherever no JVM stage
checks a value at set time: the Python backend and Spark Connect. The JVM stage is the reference
here: for every param of every stage and a spread of values of its type, the Python check takes
exactly the values the JVM stage takes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import generated_classes
from pyspark.ml.param import TypeConverters

import mmlspark
from mmlspark.core.wrapper import MMLParams

# Values of each param type, around the bounds and choices the tables use.
CANDIDATES: dict[Any, list[Any]] = {
    TypeConverters.toInt: [0, -1, -2, 1, 2, 3, 5, 8],
    TypeConverters.toFloat: [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5],
    TypeConverters.toString: [
        "", " ", "x", "XYZ", "rgb", " BGR ", "gpu", "CUDA", "mean", "max", "auto", "color",
        "yolov8", "heuristic", "accuracy", "classification", "int",
    ],
    TypeConverters.toListString: [[], [""], ["a"], ["a", "a"], ["a", "b"]],
    TypeConverters.toListFloat: [[], [1.0], [0.0], [1.0, 2.0], [1.0, 2.0, 3.0], [1.0, -2.0, 3.0]],
    TypeConverters.toListInt: [[], [1], [-1]],
}  # fmt: skip

# Params whose JVM validator is a plain function, not a Check (JSON, a DDL type): only the JVM
# checks them at set time; the Python backends check the value where they parse it.
JVM_ONLY = {
    ("ImageTransformer", "operations"),
    ("ONNXModel", "feedDict"),
    ("ONNXModel", "fetchDict"),
    ("ONNXModel", "softMaxDict"),
    ("ONNXModel", "argMaxDict"),
    ("TrainedClassifierModel", "labelType"),
    ("TrainedRegressorModel", "labelType"),
    ("ValueIndexerModel", "dataType"),
}


def _jvm_takes(stage: MMLParams, name: str, value: Any) -> bool:
    try:
        stage._set(**{name: value})
    except ValueError:
        return False
    return True


def _python_takes(stage: MMLParams, name: str, value: Any) -> bool:
    try:
        stage._check_without_jvm({name: value})
    except ValueError:
        return False
    return True


def test_every_validator_takes_on_python_what_it_takes_on_the_jvm(spark):
    checked, refused_somewhere = set(), set()
    for cls in generated_classes():
        stage = cls()
        assert stage._java_obj is not None, cls  # the JVM stage, the reference
        for param in stage.params:
            values = CANDIDATES.get(param.typeConverter)
            if values is None:
                continue
            key = (cls.__name__, param.name)
            if param.name in cls._python_param_checks:
                checked.add(key)
            for value in values:
                jvm = _jvm_takes(stage, param.name, value)
                if not jvm:
                    refused_somewhere.add(key)
                if key not in JVM_ONLY:
                    assert _python_takes(stage, param.name, value) == jvm, (key, value, jvm)
    # Each check refuses one of the values above on the JVM (so it was put to the test), and
    # every param the JVM refuses values of has a Python check, but for the plain functions.
    assert checked - refused_somewhere == set(), "add values that these params refuse"
    assert refused_somewhere - checked == JVM_ONLY & refused_somewhere
    assert len(checked) > 100, len(checked)


@pytest.mark.parametrize(
    ("stage", "param", "value"),
    [
        ("mmlspark.onnx.ONNXModel", "miniBatchSize", 0),
        ("mmlspark.onnx.ImageFeaturizer", "miniBatchSize", 0),
        ("mmlspark.opencv.ImageTransformer", "tensorChannelOrder", "XYZ"),
        ("mmlspark.image.ImageDecoder", "reduceFactor", 3),
        ("mmlspark.onnx.ONNXModel", "intraOpThreads", -1),
        ("mmlspark.opencv.ImageTransformer", "inputCol", ""),
    ],
)
def test_values_the_jvm_refuses_are_refused_on_the_python_backend(spark, stage, param, value):
    """Values that were refused at set time on the JVM backend and taken on the Python backend,
    which then ran with them (miniBatchSize=0: one row per ONNX run)."""
    import importlib

    module, _, name = stage.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    message = f"parameter {param} given invalid value {value}."
    with pytest.raises(ValueError, match=f"invalid value .* for param '{param}'") as on_jvm:
        cls(**{param: value})
    mmlspark.set_backend("python")
    try:
        with pytest.raises(ValueError, match=message):
            cls(**{param: value})
        with pytest.raises(ValueError, match=message):
            getattr(cls(), f"set{param[0].upper()}{param[1:]}")(value)
    finally:
        mmlspark.set_backend(None)
    assert message in str(on_jvm.value)


def test_each_stage_spec_holds_every_param_of_the_jvm_stage_with_its_value(spark):
    """The frozen spec the Python backend runs with (``_spec()``, generated) has one field per
    param of the JVM stage, in name order after ``uid``, holding the JVM stage's value: the
    default, or the value set (a list as a tuple), None where it has neither."""
    from py4j.java_gateway import JavaObject

    for cls in generated_classes():
        stage = cls()
        java = stage._java_obj
        for param in stage.params:  # set what a list-valued param can take, to see it arrive
            if param.typeConverter is TypeConverters.toListString and not stage.isSet(param):
                stage._set(**{param.name: ["b", "a"]})
        spec = stage._spec()
        names = sorted(p.name() for p in java.params())
        assert [f.name for f in dataclasses.fields(spec)] == ["uid", *names], cls
        assert spec.uid == java.uid()
        for name in names:
            jvm_param = java.getParam(name)
            value = getattr(spec, name)
            if not java.isDefined(jvm_param):
                assert value is None, (cls, name)
                continue
            expected = java.getOrDefault(jvm_param)
            if isinstance(expected, JavaObject):  # a stage: the JVM's own object
                assert value is not None, (cls, name)
                continue
            if not isinstance(expected, (str, bool, int, float)):
                expected = tuple(expected)  # a JVM array
            assert value == expected and type(value) is type(expected), (cls, name, value)
