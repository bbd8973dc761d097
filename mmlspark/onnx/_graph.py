"""Cutting an ONNX model at inner tensors on the driver, for the Python backend (the ``onnx``
package): the twin of the JVM's ``OnnxGraph.cut``, with the same results and messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["cut"]


def _resolve(name: str, nodes: Sequence[Any]) -> str:
    """The tensor a node or tensor name stands for."""
    if any(name in node.output for node in nodes):
        return name
    node = next((n for n in nodes if n.name == name), None)
    if node is None:
        known = list(
            dict.fromkeys([n.name for n in nodes if n.name] + [o for n in nodes for o in n.output])
        )
        more = ", ..." if len(known) > 40 else ""
        raise ValueError(
            f"the model has no node or tensor '{name}'; it has {', '.join(known[:40])}{more}"
        )
    if len(node.output) != 1:
        raise ValueError(
            f"node '{name}' has {len(node.output)} outputs ({', '.join(node.output)}); "
            "name one of them"
        )
    return str(node.output[0])


def cut(model: bytes, targets: Sequence[str]) -> bytes:
    """The model that computes only `targets` (tensor or node names) from the inputs they need:
    nodes, initializers and inputs no target depends on are dropped, and the targets become the
    graph's outputs (typed where the model declares them)."""
    try:
        import onnx
    except ImportError as error:
        raise ImportError(
            "cutting an ONNX model on the Python backend needs the onnx package: pip install "
            "'mmlspark[cpu]' (or mmlspark[gpu])"
        ) from error
    proto = onnx.load_model_from_string(model)
    graph = proto.graph
    nodes = list(graph.node)
    wanted = [_resolve(t, nodes) for t in targets]
    needed = set(wanted)
    kept = []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
    kept.reverse()
    # A typed declaration of a target, if the model has one (value_info's over output's).
    declared = {v.name: v for v in list(graph.output) + list(graph.value_info)}
    outputs = [declared.get(name) or onnx.ValueInfoProto(name=name) for name in wanted]
    initializers = [t for t in graph.initializer if t.name in needed]
    inputs = [v for v in graph.input if v.name in needed]
    infos = [v for v in graph.value_info if v.name in needed]
    for field, values in (
        (graph.node, kept),
        (graph.initializer, initializers),
        (graph.input, inputs),
        (graph.value_info, infos),
        (graph.output, outputs),
    ):
        copies = [type(v)() for v in values]
        for copy, value in zip(copies, values, strict=True):
            copy.CopyFrom(value)
        del field[:]
        field.extend(copies)
    return bytes(proto.SerializeToString())
