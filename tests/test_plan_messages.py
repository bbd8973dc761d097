"""The refusals an ONNXModel or an ObjectDetector gives before any job (the model against its
params and the input schema) are the same words on both backends, and every message of the two
planning tables (``mmlspark.onnx.PlanMessages``, ``mmlspark.detection.DetectorPlanMessages``) is
reached by one of the cases here: a message no case reaches is either dead or untested."""

from __future__ import annotations

import re

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto, helper, numpy_helper
from pyspark.sql import functions as F

from mmlspark.detection import ObjectDetector
from mmlspark.onnx import ONNXModel


def _model(nodes, inputs, outputs, initializers=()) -> bytes:
    graph = helper.make_graph(nodes, "plan", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model.SerializeToString()


def _uint16_input() -> bytes:
    """x: uint16 [N, 3] (a type no Spark column feeds) -> y = x."""
    u16 = TensorProto.UINT16
    return _model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", u16, ["N", 3])],
        [helper.make_tensor_value_info("y", u16, ["N", 3])],
    )


def _sequence_output() -> bytes:
    """x: float [N, 3] -> s = a sequence of tensors (neither a tensor nor a sequence of maps)."""
    f = TensorProto.FLOAT
    return _model(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["s"])],
        [helper.make_tensor_value_info("x", f, ["N", 3])],
        [helper.make_tensor_sequence_value_info("s", f, ["N", 3])],
    )


def _image_model(height: int, width: int) -> bytes:
    """images: float [N, 3, height, width] -> output0 [N, 3, width]: the mean over the rows."""
    f = TensorProto.FLOAT
    return _model(
        [helper.make_node("ReduceMean", ["images", "axes"], ["output0"], keepdims=0)],
        [helper.make_tensor_value_info("images", f, ["N", 3, height, width])],
        [helper.make_tensor_value_info("output0", f, ["N", 3, width])],
        [numpy_helper.from_array(np.array([2], np.int64), "axes")],
    )


def _tensors(spark):
    return spark.createDataFrame([(0, [1.0, 2.0, 3.0], "a")], "id int, x array<float>, s string")


def _image_tensors(spark):
    shape = {"tensorShape": [3, 8, 8]}
    df = spark.createDataFrame([(0, [0.5] * 192)], "id int, t array<float>")
    return df.select("id", F.col("t").alias("t", metadata=shape))


def _photos(spark):
    return spark.createDataFrame([(0, bytearray(b"\xff\xd8 not a photo"))], "id int, image binary")


# (id, stage params, model, input) for ONNXModel; each refuses before any job.
ONNX_CASES = [
    ("no-model", dict(inputCol="x", outputCol="y"), None, _tensors),
    ("not-loadable", dict(inputCol="x", outputCol="y"), "garbage", _tensors),
    ("unknown-input", dict(feedDict={"nope": "x"}, outputCol="y"), "typed", _tensors),
    ("no-input-col", dict(outputCol="y"), "typed", _tensors),
    ("many-inputs", dict(inputCol="x", outputCol="y"), "two", _tensors),
    ("unfed", dict(feedDict={"a": "x"}, fetchDict={"y": "sum"}), "two", _tensors),
    ("not-feedable", dict(inputCol="x", outputCol="y"), "uint16", _tensors),
    ("column-type", dict(inputCol="s", fetchDict={"y": "same"}), "typed", _tensors),
    ("column-type-strings", dict(inputCol="x", fetchDict={"y": "same"}), "strings", _tensors),
    ("column-type-booleans", dict(inputCol="s", fetchDict={"y": "same"}), "booleans", _tensors),
    ("transposed", dict(inputCol="t", outputCol="y"), "channels_last", _image_tensors),
    ("not-cut", dict(inputCol="x", fetchDict={"y": "nope"}), "typed", _tensors),
    (
        "unknown-output",
        dict(feedDict={"image": "x"}, fetchDict={"f": "features_node"}),
        "cnn",
        _tensors,
    ),
    ("no-output-col", dict(inputCol="x"), "sequence", _tensors),
    ("many-outputs", dict(inputCol="x", outputCol="y"), "typed", _tensors),
    ("not-fetchable", dict(inputCol="x", outputCol="y"), "sequence", _tensors),
    (
        "not-fetched",
        dict(inputCol="x", fetchDict={"y": "same"}, softMaxDict={"z": "p"}),
        "typed",
        _tensors,
    ),
    (
        "not-floating",
        dict(inputCol="x", fetchDict={"y": "same"}, argMaxDict={"y": "best"}),
        "typed-int",
        _tensors,
    ),
    ("column-exists", dict(inputCol="x", fetchDict={"x": "same"}), "typed", _tensors),
    (
        "not-distinct",
        dict(inputCol="x", fetchDict={"y": "same"}, argMaxDict={"y": "y"}),
        "typed",
        _tensors,
    ),
]

DETECTOR_CASES = [
    ("inputs", dict(), "two"),
    ("not-image", dict(), "typed"),
    ("not-square", dict(), "wide"),
    ("size", dict(imageSize=64), "echo"),
    ("bad-output-two-dimensions", dict(), "flat-output"),
    ("not-v5", dict(modelFormat="yolov5"), "echo-v8-narrow"),
    ("not-v8", dict(modelFormat="yolov8"), "echo-v5-narrow"),
    ("ambiguous", dict(), "echo-square"),
    ("classes", dict(classNames=["animal", "person"]), "echo"),
]

MODELS = {
    None: lambda: None,
    "garbage": lambda: b"not a model",
    "cnn": lambda: onnx_models.small_cnn(classes=3, size=6),
    "typed": lambda: onnx_models.typed(TensorProto.FLOAT),
    "typed-int": lambda: onnx_models.typed(TensorProto.INT64),
    "strings": lambda: onnx_models.typed(TensorProto.STRING),
    "booleans": lambda: onnx_models.typed(TensorProto.BOOL),
    "two": onnx_models.two_in_two_out,
    "uint16": _uint16_input,
    "sequence": _sequence_output,
    "channels_last": onnx_models.channels_last,
    "wide": lambda: _image_model(32, 16),
    "echo": lambda: onnx_models.yolo_echo(size=32, classes=3),
    "flat-output": onnx_models.mean_over_pixels,
    "echo-v8-narrow": lambda: onnx_models.yolo_echo(size=32, boxes=4, classes=1, layout="yolov8"),
    "echo-v5-narrow": lambda: onnx_models.yolo_echo(size=32, boxes=4, classes=1),
    "echo-square": lambda: onnx_models.yolo_echo(size=32, boxes=7, classes=2),
}

# Cases whose refusals end in ONNX Runtime's own words, which its Java and Python bindings put
# differently: the two backends' messages agree up to them.
ENGINE_WORDS = {"not-loadable": "can load: "}

# Messages no stage can reach through its public params, with the reason.
UNREACHABLE = {
    # ONNX Runtime refuses to load a graph without outputs, so the model is refused earlier.
    "detectorNoOutput",
}


def _refusal(stage, df) -> str:
    try:
        stage.transform(df)
    except Exception as refused:  # noqa: BLE001 - py4j's and pyspark's error types both
        message = str(refused)
    else:
        return "(no refusal)"
    # py4j's wrapping of the JVM's IllegalArgumentException: its message only.
    return message.split("java.lang.IllegalArgumentException: ")[-1].splitlines()[0].strip()


@pytest.fixture(scope="module")
def refusals(spark):
    """Each case's refusal on the JVM backend and on the Python backend."""
    found = {}
    for name, params, model, data in ONNX_CASES:
        payload, df = MODELS[model](), data(spark)
        stages = [ONNXModel(**params).setBackend(b) for b in ("jvm", "python")]
        if payload is not None:
            stages = [stage.setModelPayload(payload) for stage in stages]
        found[name] = tuple(_refusal(stage, df) for stage in stages)
    photos = _photos(spark)
    for name, params, model in DETECTOR_CASES:
        payload = MODELS[model]()
        found["detector-" + name] = tuple(
            _refusal(ObjectDetector(**params).setBackend(b).setModelPayload(payload), photos)
            for b in ("jvm", "python")
        )
    return found


def test_refusals_before_any_job_are_the_same_words_on_both_backends(refusals):
    for name, (jvm, python) in refusals.items():
        stage = "ObjectDetector" if name.startswith("detector-") else "ONNXModel"
        for text in (jvm, python):
            assert re.match(rf"{stage} {stage}_[0-9a-f]+: ", text), (name, text)
        jvm, python = jvm.split(": ", 1)[1], python.split(": ", 1)[1]
        if name in ENGINE_WORDS:
            end = ENGINE_WORDS[name]
            jvm, python = jvm[: jvm.index(end)], python[: python.index(end)]
        assert jvm == python, name


def _pattern(template: str) -> re.Pattern[str]:
    """A message made from `template`: its words, any value in each placeholder."""
    parts = re.split(r"\{\w+(?::\w+)?\}", template)
    return re.compile(".+".join(re.escape(p) for p in parts), re.DOTALL)


def test_every_planning_message_is_reached_by_a_case(spark, refusals):
    jvm = spark.sparkContext._jvm
    tables = [
        jvm.mmlspark.onnx.PlanMessages.all(),
        jvm.mmlspark.detection.DetectorPlanMessages.all(),
    ]
    templates = {}
    for table in tables:
        for i in range(table.size()):
            message = table.apply(i)
            templates[message.key()] = message.template()
    # A message put into others (a type description, a layout's reason) is reached with them.
    texts = [python for _, python in refusals.values()]
    missed = [
        key
        for key, template in templates.items()
        if key not in UNREACHABLE and not any(_pattern(template).search(t) for t in texts)
    ]
    assert not missed, f"no case reaches {missed}"
    assert UNREACHABLE <= templates.keys()
