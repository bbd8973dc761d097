"""Benchmark models built in code with random weights: the ResNet-50 architecture (the same
graph and cost as the real one; batch norms folded into the convolutions, as ONNX Runtime does
at load time anyway) and a tiny CNN whose per-image cost is small enough that everything around
the model shows."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w, b, y = self._name("w"), self._name("b"), self._name("conv")
        scale = np.float32(np.sqrt(2.0 / (cin * k * k)))  # float32 weights under numpy 2 too
        self.weights.append(
            numpy_helper.from_array(
                (self.rng.standard_normal((cout, cin, k, k), dtype=np.float32) * scale), w
            )
        )
        self.weights.append(numpy_helper.from_array(np.zeros(cout, dtype=np.float32), b))
        pad = k // 2
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, w, b],
                [y],
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pad] * 4,
            )
        )
        return self.relu(y) if relu else y

    def relu(self, x: str) -> str:
        y = self._name("relu")
        self.nodes.append(helper.make_node("Relu", [x], [y]))
        return y

    def op(self, kind: str, inputs: list[str], **attrs) -> str:
        y = self._name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [y], **attrs))
        return y

    def gemm(self, x: str, cin: int, cout: int, out: str) -> str:
        w, b = self._name("fc_w"), self._name("fc_b")
        self.weights.append(
            numpy_helper.from_array(
                self.rng.standard_normal((cout, cin), dtype=np.float32) * np.float32(0.01), w
            )
        )
        self.weights.append(numpy_helper.from_array(np.zeros(cout, dtype=np.float32), b))
        self.nodes.append(helper.make_node("Gemm", [x, w, b], [out], transB=1))
        return out

    def model(self, size: int, classes: int, name: str) -> bytes:
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, size, size])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
            initializer=self.weights,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        return model.SerializeToString()


def resnet50(seed: int = 0) -> bytes:
    """ResNet-50 v1.5 (stride on the 3x3 convolution), 224x224 RGB in, 1000 logits out."""
    g = _Graph(seed)
    x = g.conv("image", 3, 64, 7, stride=2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        cout = mid * 4
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = g.conv(x, cin, mid, 1)
            y = g.conv(y, mid, mid, 3, stride=s)
            y = g.conv(y, mid, cout, 1, relu=False)
            shortcut = g.conv(x, cin, cout, 1, stride=s, relu=False) if i == 0 else x
            x = g.relu(g.op("Add", [y, shortcut]))
            cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.gemm(x, 2048, 1000, "logits")
    return g.model(224, 1000, "resnet50")


def tiny_cnn(seed: int = 0, size: int = 32, classes: int = 10, relu: bool = True) -> bytes:
    """size x size RGB in: two 3x3 convolutions (16, 32 filters, each with a ReLU unless `relu`
    is False) with max pooling, `classes` logits out."""
    g = _Graph(seed)
    x = g.conv("image", 3, 16, 3, relu=relu)
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.conv(x, 16, 32, 3, relu=relu)
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.gemm(x, 32, classes, "logits")
    return g.model(size, classes, "tiny_cnn")


def quick_classifier(seed: int = 0) -> bytes:
    """resnet50()'s stand-in in the benchmarks' quick (smoke) runs: its input, output and pooled
    features (image [N, 3, 224, 224] -> Flatten -> logits [N, 1000]) at 1/50 of its cost, the
    tiny CNN without its ReLUs. Being linear, it gives photos of different colours different top
    classes, so the runs' top-class checks tell photos apart (with random weights and ReLUs every
    photo gets the same class)."""
    return tiny_cnn(seed, size=224, classes=1000, relu=False)


def classifier(quick: bool) -> tuple[str, bytes]:
    """The whole-image classifier of a benchmark run: (its name in tables, the model)."""
    if quick:
        return "tiny CNN (the quick runs' stand-in for ResNet-50)", quick_classifier()
    return "ResNet-50 architecture", resnet50()


def for_old_runtimes(model: bytes, opset: int = 13, ir_version: int = 7) -> bytes:
    """The same graph declared at an older opset and IR version, for older ONNX Runtime builds
    (SynapseML ships ONNX Runtime 1.8, which reads up to opset 14 and IR 7). Every operator used
    here (Conv, Relu, MaxPool, Add, GlobalAveragePool, Flatten, Gemm) means the same there."""
    proto = onnx.load_from_string(model)
    used = {node.op_type for node in proto.graph.node}
    allowed = {"Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"}
    if not used <= allowed:
        raise ValueError(f"operators {sorted(used - allowed)} were not checked at opset {opset}")
    del proto.opset_import[:]
    proto.opset_import.append(helper.make_opsetid("", opset))
    proto.ir_version = ir_version
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def yolo_detector(size: int = 640, classes: int = 3, seed: int = 0) -> bytes:
    """A detector of YOLOv5s's size and output, random weights: images [N, 3, size, size] ->
    output0 [N, 3 * ((size/8)^2 + (size/16)^2 + (size/32)^2), 5 + classes] (25 200 boxes at 640,
    MegaDetector v5's layout). A strided backbone with residual bottlenecks (32 to 512 channels,
    about 6 G multiply-adds at 640; YOLOv5s has 8) feeds three 1x1 heads at strides 8, 16 and 32;
    sigmoid outputs scaled to pixels, objectness biased to about 3e-4, as an empty photo gives."""
    g = _Graph(seed)
    per = 5 + classes

    def bottleneck(x: str, c: int) -> str:
        y = g.conv(g.conv(x, c, c // 2, 1), c // 2, c, 3, relu=False)
        return g.relu(g.op("Add", [x, y]))

    x = g.conv("images", 3, 32, 3, stride=2)
    x = bottleneck(g.conv(x, 32, 64, 3, stride=2), 64)
    features = []
    cin = 64
    for cout, blocks in ((128, 2), (256, 3), (512, 1)):
        x = g.conv(x, cin, cout, 3, stride=2)
        for _ in range(blocks):
            x = bottleneck(x, cout)
        features.append((x, cout))
        cin = cout
    scale = np.array([size, size, size / 4, size / 4] + [1.0] * (per - 4), np.float32)
    g.weights.append(numpy_helper.from_array(scale, "box_scale"))
    heads = []
    for i, (feature, c) in enumerate(features):
        w, b = f"head_w{i}", f"head_b{i}"
        weight = g.rng.standard_normal((3 * per, c, 1, 1), dtype=np.float32) * np.float32(0.01)
        bias = np.zeros(3 * per, np.float32)
        bias[4::per] = -8.0  # objectness
        g.weights += [numpy_helper.from_array(weight, w), numpy_helper.from_array(bias, b)]
        y = g.op("Conv", [feature, w, b])
        side = size // (8 * 2**i)
        shape = f"head_shape{i}"
        g.weights.append(numpy_helper.from_array(np.array([-1, 3, per, side, side]), shape))
        y = g.op(
            "Transpose", [g.op("Reshape", [g.op("Sigmoid", [y]), shape])], perm=[0, 1, 3, 4, 2]
        )
        flat = f"flat_shape{i}"
        g.weights.append(numpy_helper.from_array(np.array([-1, 3 * side * side, per]), flat))
        heads.append(g.op("Reshape", [y, flat]))
    out = g.op("Concat", heads, axis=1)
    g.nodes.append(helper.make_node("Mul", [out, "box_scale"], ["output0"]))
    boxes = 3 * sum((size // s) ** 2 for s in (8, 16, 32))
    graph = helper.make_graph(
        g.nodes,
        "yolo_detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["N", boxes, per])],
        initializer=g.weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()
