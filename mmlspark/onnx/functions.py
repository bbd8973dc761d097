"""Looking into ONNX model files without Spark."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["inspect_model"]

# ONNX element type names as ONNXModel reports them.
_NAMES = {"FLOAT": "float", "DOUBLE": "double", "STRING": "string", "BOOL": "bool"}


def _spec(value: Any) -> dict[str, Any]:
    from onnx import TensorProto

    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        return {
            "type": {"sequence_type": "sequence", "map_type": "map"}.get(kind, str(kind)),
            "shape": [],
            "dimNames": [],
        }
    tensor = value.type.tensor_type
    name = TensorProto.DataType.Name(tensor.elem_type)
    dims = tensor.shape.dim
    return {
        "type": _NAMES.get(name, name.lower()),
        "shape": [d.dim_value if d.HasField("dim_value") else -1 for d in dims],
        "dimNames": [d.dim_param for d in dims],
    }


def inspect_model(model: str | os.PathLike[str] | bytes) -> dict[str, dict[str, dict[str, Any]]]:
    """The inputs and outputs of an ONNX model file (or its bytes), without Spark.

    Returns ``{"inputs": {name: spec}, "outputs": {name: spec}}`` where a spec has ``type``
    (``float``, ``int64``, ...), ``shape`` (-1 for a dynamic dimension) and ``dimNames``, the
    same form as :meth:`mmlspark.onnx.ONNXModel.getModelInputs`. Inputs that have an initializer
    (a default value) are not listed. Needs the ``onnx`` package (``pip install onnx``).

    Examples
    --------
    >>> inspect_model("classifier.onnx")["inputs"]  # doctest: +SKIP
    {'image': {'type': 'float', 'shape': [-1, 3, 224, 224], 'dimNames': ['N', '', '', '']}}
    """
    try:
        import onnx
    except ImportError:
        raise ImportError("inspect_model needs the onnx package: pip install onnx") from None
    proto = (
        onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(os.fspath(model))
    )
    graph = proto.graph
    initialized = {i.name for i in graph.initializer}
    return {
        "inputs": {v.name: _spec(v) for v in graph.input if v.name not in initialized},
        "outputs": {v.name: _spec(v) for v in graph.output},
    }
