"""Small ONNX models built in code with onnx.helper, for the tests (Python and Scala).

Run as a script to (re)write the copies the Scala suites read:
``python tests/onnx_models.py scala/src/test/resources/onnx``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Opset and IR version every ONNX Runtime from 1.16 on runs.
OPSET = [helper.make_opsetid("", 17)]
IR_VERSION = 8
LABELS = ["cat", "deer", "empty"]


def _model(nodes, inputs, outputs, initializers=(), name="test", opsets=None) -> bytes:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=opsets or OPSET, ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _io(name: str, elem: int, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def two_in_two_out() -> bytes:
    """a, b: float [N, 3] -> sum = a + b, product = a * b (both [N, 3]), total = sum of a [N]."""
    f = TensorProto.FLOAT
    return _model(
        [
            helper.make_node("Add", ["a", "b"], ["sum"]),
            helper.make_node("Mul", ["a", "b"], ["product"]),
            helper.make_node("ReduceSum", ["a", "axes"], ["total"], keepdims=0),
        ],
        [_io("a", f, ["N", 3]), _io("b", f, ["N", 3])],
        [_io("sum", f, ["N", 3]), _io("product", f, ["N", 3]), _io("total", f, ["N"])],
        [numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )


def fixed_batch() -> bytes:
    """x: float [1, 4] (batch fixed at 1) -> y = 2x + 1."""
    f = TensorProto.FLOAT
    return _model(
        [
            helper.make_node("Mul", ["x", "two"], ["t"]),
            helper.make_node("Add", ["t", "one"], ["y"]),
        ],
        [_io("x", f, [1, 4])],
        [_io("y", f, [1, 4])],
        [
            numpy_helper.from_array(np.array(2, dtype=np.float32), "two"),
            numpy_helper.from_array(np.array(1, dtype=np.float32), "one"),
        ],
    )


def typed(elem: int, width: int = 3) -> bytes:
    """x: [N, width] of `elem` -> same = x (identity), as_float = float(x) * 0.5; for strings
    code = LABELS index of x (-1 for others, int64) instead of as_float."""
    if elem == TensorProto.STRING:
        nodes = [
            helper.make_node("Identity", ["x"], ["same"]),
            helper.make_node(
                "LabelEncoder",
                ["x"],
                ["code"],
                domain="ai.onnx.ml",
                keys_strings=LABELS,
                values_int64s=list(range(len(LABELS))),
                default_int64=-1,
            ),
        ]
        return _model(
            nodes,
            [_io("x", elem, ["N", width])],
            [_io("same", elem, ["N", width]), _io("code", TensorProto.INT64, ["N", width])],
            opsets=OPSET + [helper.make_opsetid("ai.onnx.ml", 2)],
        )
    nodes = [
        helper.make_node("Identity", ["x"], ["same"]),
        helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xf", "half"], ["as_float"]),
    ]
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    return _model(
        nodes,
        [_io("x", elem, ["N", width])],
        [_io("same", elem, ["N", width]), _io("as_float", TensorProto.FLOAT, ["N", width])],
        [half],
    )


def small_cnn(classes: int = 5, size: int | str = "H", seed: int = 7) -> bytes:
    """image: float [N, 3, H, W] -> Conv 3x3 (4 filters) -> Relu -> GlobalAveragePool -> Flatten
    ('features', [N, 4]) -> Gemm -> 'logits' [N, classes]. Random weights from `seed`."""
    rng = np.random.default_rng(seed)
    f = TensorProto.FLOAT
    w = size if isinstance(size, int) else "W"
    weights = [
        numpy_helper.from_array(rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32), "conv_w"),
        numpy_helper.from_array(rng.normal(0, 0.1, (4,)).astype(np.float32), "conv_b"),
        numpy_helper.from_array(rng.normal(0, 0.5, (classes, 4)).astype(np.float32), "fc_w"),
        numpy_helper.from_array(rng.normal(0, 0.1, (classes,)).astype(np.float32), "fc_b"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["features"], name="features_node"),
        helper.make_node("Gemm", ["features", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    return _model(
        nodes,
        [_io("image", f, ["N", 3, size, w])],
        [_io("logits", f, ["N", classes])],
        weights,
        name="small_cnn",
    )


def batch_probe(row_shape: list[int]) -> bytes:
    """x: float [N, *row_shape] -> rows = N, the number of rows the run was given (float [N]),
    and mean = the mean of each row's values (float [N]): shows how rows were batched."""
    f = TensorProto.FLOAT
    axes = list(range(1, len(row_shape) + 1))
    return _model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
            helper.make_node("Cast", ["n"], ["n_float"], to=f),
            helper.make_node("Expand", ["n_float", "n"], ["rows"]),
            helper.make_node("ReduceMean", ["x"], ["mean"], axes=axes, keepdims=0),
        ],
        [_io("x", f, ["N", *row_shape])],
        [_io("rows", f, ["N"]), _io("mean", f, ["N"])],
        [
            numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
        ],
    )


def wide_output(per_row: int, fixed: bool) -> bytes:
    """x: float [N, 1] -> y = x repeated `per_row` times, float [N, per_row]; the output's width
    is declared in the model (`fixed`) or only known once it runs."""
    f = TensorProto.FLOAT
    return _model(
        [helper.make_node("Expand", ["x", "width"], ["y"])],
        [_io("x", f, ["N", 1])],
        [_io("y", f, ["N", per_row if fixed else "M"])],
        [numpy_helper.from_array(np.array([1, per_row], dtype=np.int64), "width")],
    )


def endless_loop(trips: int = 10**12) -> bytes:
    """x: float [N, 1] -> y = x + trips, computed by a Loop of `trips` iterations that each add
    one: with the default, a run that never ends on its own."""
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [
            _io("iteration", TensorProto.INT64, []),
            _io("cond_in", TensorProto.BOOL, []),
            _io("v_in", f, ["N", 1]),
        ],
        [_io("cond_out", TensorProto.BOOL, []), _io("v_out", f, ["N", 1])],
        [numpy_helper.from_array(np.array(1, dtype=np.float32), "one")],
    )
    return _model(
        [helper.make_node("Loop", ["trips", "keep_going", "x"], ["y"], body=body)],
        [_io("x", f, ["N", 1])],
        [_io("y", f, ["N", 1])],
        [
            numpy_helper.from_array(np.array(trips, dtype=np.int64), "trips"),
            numpy_helper.from_array(np.array(True), "keep_going"),
        ],
    )


def lookup(table: tuple[float, ...] = (10.0, 20.0, 30.0, 40.0, 50.0)) -> bytes:
    """index: int64 [N, 1] -> value = table[index] [N, 1]; an index outside the table fails the
    run it is in (and only the rows with one should fail)."""
    return _model(
        [helper.make_node("Gather", ["table", "index"], ["value"], axis=0)],
        [_io("index", TensorProto.INT64, ["N", 1])],
        [_io("value", TensorProto.FLOAT, ["N", 1])],
        [numpy_helper.from_array(np.array(table, dtype=np.float32), "table")],
    )


def save_with_external_data(model: bytes, folder: Path, location: str = "weights.bin") -> Path:
    """Writes `model` as folder/model.onnx with every initializer in the file `location` beside
    it (ONNX's external data); returns the model's path."""
    folder.mkdir(parents=True, exist_ok=True)
    proto = onnx.load_from_string(model)
    path = folder / "model.onnx"
    onnx.save_model(
        proto,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return path


def zipmap_classifier(labels: list[int] | list[str] | None = None, seed: int = 5) -> bytes:
    """x: float [N, 4] -> Gemm -> Softmax ('probabilities' [N, k]) -> ZipMap ->
    'output_probability', a sequence of maps (label -> probability), one per row, and the most
    probable label, 'output_label' [N]: the default outputs of classifiers converted from
    scikit-learn. Integer or string labels."""
    labels = labels if labels is not None else [10, 20, 30]
    rng = np.random.default_rng(seed)
    f = TensorProto.FLOAT
    k = len(labels)
    weights = [
        numpy_helper.from_array(rng.normal(0, 1, (k, 4)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(0, 0.1, (k,)).astype(np.float32), "b"),
    ]
    if isinstance(labels[0], str):
        zip_attrs = {"classlabels_strings": labels}
        key = TensorProto.STRING
        weights.append(numpy_helper.from_array(np.array(labels, dtype=object), "labels"))
    else:
        zip_attrs = {"classlabels_int64s": labels}
        key = TensorProto.INT64
        weights.append(numpy_helper.from_array(np.array(labels, np.int64), "labels"))
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["logits"], transB=1),
        helper.make_node("ArgMax", ["logits"], ["index"], axis=1, keepdims=0),
        helper.make_node("Gather", ["labels", "index"], ["output_label"], axis=0),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        helper.make_node(
            "ZipMap", ["probabilities"], ["output_probability"], domain="ai.onnx.ml", **zip_attrs
        ),
    ]
    zipped = helper.make_value_info(
        "output_probability",
        helper.make_sequence_type_proto(
            helper.make_map_type_proto(key, helper.make_tensor_type_proto(f, []))
        ),
    )
    return _model(
        nodes,
        [_io("x", f, ["N", 4])],
        [_io("output_label", key, ["N"]), _io("probabilities", f, ["N", k]), zipped],
        weights,
        name="zipmap_classifier",
        opsets=OPSET + [helper.make_opsetid("ai.onnx.ml", 1)],
    )


def yolo_echo(size: int = 32, boxes: int = 16, classes: int = 3, layout: str = "yolov5") -> bytes:
    """A YOLO-layout detector whose output is written in its input image: images [N, 3, size,
    size] -> output0 = the first (red) channel's top-left rows, times a scale per attribute.

    yolov5: output0 [N, boxes, 5 + classes] = image[:, 0, :boxes, :5 + classes] * scale, where
    scale is ``size`` for cx, cy, w, h and 1 for objectness and the class scores. yolov8: output0
    [N, 4 + classes, boxes] = image[:, 0, :4 + classes, :boxes] * scale (one row per attribute).
    A size x size image therefore gives the raw output pixel / 255 * scale, in float32."""
    f = TensorProto.FLOAT
    attributes = (5 if layout == "yolov5" else 4) + classes
    rows, cols = (boxes, attributes) if layout == "yolov5" else (attributes, boxes)
    assert rows <= size and cols <= size
    per_attribute = np.array([size] * 4 + [1] * (attributes - 4), np.float32)
    scale = per_attribute.reshape(1, -1) if layout == "yolov5" else per_attribute.reshape(-1, 1)
    weights = [
        numpy_helper.from_array(np.array([0, 0, 0], np.int64), "starts"),
        numpy_helper.from_array(np.array([1, rows, cols], np.int64), "ends"),
        numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([1], np.int64), "squeeze_axes"),
        numpy_helper.from_array(scale, "scale"),
    ]
    nodes = [
        helper.make_node("Slice", ["images", "starts", "ends", "axes"], ["red"]),
        helper.make_node("Squeeze", ["red", "squeeze_axes"], ["values"]),
        helper.make_node("Mul", ["values", "scale"], ["output0"]),
    ]
    return _model(
        nodes,
        [_io("images", f, ["N", 3, size, size])],
        [_io("output0", f, ["N", rows, cols])],
        weights,
        name=f"yolo_echo_{layout}",
    )


def yolo_constant(raw: np.ndarray, size: int | str = 32) -> bytes:
    """A YOLO-layout detector that gives every image the same raw output: images [N, 3, size,
    size] -> output0 [N, *raw.shape] = raw (whatever the pixels)."""
    f = TensorProto.FLOAT
    weights = [
        numpy_helper.from_array(raw.astype(np.float32)[None], "raw"),
        numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([0], np.float32), "zero"),
    ]
    nodes = [
        # [N, 1, 1] zeros from the input, so that the output has the input's batch size.
        helper.make_node("ReduceSum", ["images", "axes"], ["mean"], keepdims=1),
        helper.make_node("Squeeze", ["mean", "axes"], ["per_image"]),
        helper.make_node("Mul", ["per_image", "zero"], ["zeros"]),
        helper.make_node("Unsqueeze", ["zeros", "axes_12"], ["zeros3"]),
        helper.make_node("Add", ["zeros3", "raw"], ["output0"]),
    ]
    weights.append(numpy_helper.from_array(np.array([1, 2], np.int64), "axes_12"))
    side = size if isinstance(size, int) else "S"
    return _model(
        nodes,
        [_io("images", f, ["N", 3, side, side])],
        [_io("output0", f, ["N", *raw.shape])],
        weights,
        name="yolo_constant",
    )


SCALA_FIXTURES = {
    "two_in_two_out.onnx": two_in_two_out,
    "fixed_batch.onnx": fixed_batch,
    "small_cnn.onnx": small_cnn,
    "lookup.onnx": lookup,
    "yolo_echo.onnx": yolo_echo,
}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, make in SCALA_FIXTURES.items():
        (out / name).write_bytes(make())
        print(out / name)


def channels_last(height: int = 8, width: int = 8) -> bytes:
    """x: float [N, height, width, 3] (channels last) -> y = x flattened [N, height * width * 3]."""
    f = TensorProto.FLOAT
    node = helper.make_node("Flatten", ["x"], ["y"], axis=1)
    return _model(
        [node], [_io("x", f, ["N", height, width, 3])], [_io("y", f, ["N", height * width * 3])]
    )


def mean_over_pixels() -> bytes:
    """image: float [N, 3, H, W] with free H and W -> 'mean' [N, 3], each channel's mean (a model
    that needs the rows' tensor shape, as flat values cannot give it)."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("ReduceMean", ["image"], ["mean"], axes=[2, 3], keepdims=0)]
    return _model(
        nodes,
        [_io("image", f, ["N", 3, "H", "W"])],
        [_io("mean", f, ["N", 3])],
        opsets=[helper.make_opsetid("", 13)],
        name="mean_over_pixels",
    )


def zipmap_only_classifier(labels: list[int] | list[str] | None = None, seed: int = 5) -> bytes:
    """`zipmap_classifier` with its one output 'output_probability' (label -> probability, one
    map per row): a model that needs only inputCol and outputCol."""
    proto = onnx.load_from_string(zipmap_classifier(labels, seed))
    graph = proto.graph
    kept = [o for o in graph.output if o.name == "output_probability"]
    del graph.output[:]
    graph.output.extend(kept)
    nodes = [n for n in graph.node if n.op_type not in ("ArgMax", "Gather")]
    del graph.node[:]
    graph.node.extend(nodes)
    weights = [w for w in graph.initializer if w.name != "labels"]
    del graph.initializer[:]
    graph.initializer.extend(weights)
    onnx.checker.check_model(proto)
    return proto.SerializeToString()
