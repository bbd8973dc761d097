"""Looking into ONNX model files without Spark."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["inspect_model", "gpu_assignments", "gpu_discovery_script"]

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


def gpu_assignments(spark: Any, tasks: int = 8, hold_millis: int = 500) -> list[dict[str, Any]]:
    """Runs a job of ``tasks`` tasks and reports what ONNXModel sees in each: a check of a
    cluster's GPU scheduling before running models on it.

    Each entry has ``partition``, ``executor``, ``gpus`` (the addresses Spark assigned to the
    task, from ``spark.task.resource.gpu.amount``), ``device`` (the CUDA device ``deviceType``
    ``"cuda"`` binds the task to: its first GPU; ``"none"`` without GPU scheduling),
    ``cudaAvailable`` (whether that executor's ONNX Runtime has the CUDA provider) and the
    task's ``start`` and ``end`` (epoch milliseconds). Tasks are held ``hold_millis`` so that
    concurrent ones overlap.
    """
    from mmlspark.onnx import _jvm

    rows = _jvm.task_assignments(spark, tasks=int(tasks), hold_millis=int(hold_millis))
    return [json.loads(row) for row in rows]


def gpu_discovery_script() -> str:
    """The path of the GPU discovery script that ships with mmlspark: it prints the node's
    NVIDIA GPUs (``nvidia-smi``) the way Spark's ``...resource.gpu.discoveryScript`` settings
    expect, ``{"name": "gpu", "addresses": ["0", "1"]}``, and no addresses where there is no
    GPU. Install mmlspark on every worker node and give Spark this path (see docs/clusters.md)."""
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "resources" / "gpu_discovery.sh"
    if not os.access(script, os.X_OK):
        script.chmod(script.stat().st_mode | 0o111)
    return str(script)
