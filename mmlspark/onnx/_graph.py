"""Cutting an ONNX model at inner tensors on the driver, for the Python backend (the ``onnx``
package): the twin of the JVM's ``OnnxGraph.cut``, with the same results and messages."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["cut", "inline_external_data"]


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


def _graph_tensors(graph: Any) -> Iterator[Any]:
    """Every tensor of `graph`: initializers (dense and sparse), tensor attributes, and those of
    its subgraphs."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: Any) -> Iterator[Any]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        if attribute.HasField("g"):
            yield from _graph_tensors(attribute.g)
        for graph in attribute.graphs:
            yield from _graph_tensors(graph)


#: The largest model protobuf can hold in one message.
_MAX_MODEL_BYTES = 2**31 - 1


def inline_external_data(model: bytes, folder: str, source: str) -> bytes:
    """`model` with the tensor data it keeps in files of `folder` (ONNX external data) read into
    it, so that the Python backend can hold and ship it as bytes; `model` itself when it keeps
    none. Refused, with the reason, for a file outside `folder` (as the JVM refuses it), a file
    that is missing, and a model over 2 GiB once its data is in (the JVM runs those from their
    files)."""
    import os

    import onnx
    from onnx import external_data_helper

    proto = onnx.load_from_string(model)
    tensors = list(_graph_tensors(proto.graph))
    for function in proto.functions:
        for node in function.node:
            tensors.extend(_node_tensors(node))
    external = [t for t in tensors if external_data_helper.uses_external_data(t)]
    if not external:
        return model
    for tensor in external:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        relative = os.path.normpath(location)
        if not location or os.path.isabs(location) or relative.split(os.sep)[0] == "..":
            raise ValueError(
                f"the model keeps tensor data in '{location}', which is not a file in the "
                "model's directory"
            )
        if not os.path.isfile(os.path.join(folder, relative)):
            raise ValueError(
                f"the model at '{source}' keeps tensor data in '{location}', which is missing"
            )
    external_data_helper.load_external_data_for_model(proto, folder)
    if proto.ByteSize() > _MAX_MODEL_BYTES:
        raise ValueError(
            f"the model at '{source}' is over 2 GiB with its external data, and the Python "
            "backend holds a model as one message of bytes; run it on the JVM backend (a "
            "session with the mmlspark jar), which reads the data from its files"
        )
    return proto.SerializeToString()  # type: ignore[no-any-return]
