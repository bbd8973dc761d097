"""The model bytes and introspection shared by the stages that run an ONNX model."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from mmlspark.core.wrapper import require_java_obj

_S = TypeVar("_S", bound="HasModelPayload")


_PAYLOAD_INSTEAD = "give the model as modelLocation, a path the Connect server can read"
_INSPECT_INSTEAD = "read the model file with mmlspark.onnx.inspect_model(path) instead"


def _specs(text: str) -> dict[str, dict[str, Any]]:
    return {spec.pop("name"): spec for spec in json.loads(text)}


class HasModelPayload:
    """Methods of a JVM stage that holds an ONNX model (``mmlspark.onnx.HasOnnxModel``)."""

    _java_obj: Any

    def _jvm_stage(self, feature: str, instead: str) -> Any:
        return require_java_obj(self, f"{type(self).__name__}.{feature}", instead)

    def setModelPayload(self: _S, payload: bytes) -> _S:
        """Sets the model from its bytes (an ONNX file's content); takes precedence over
        ``modelLocation`` and is saved with the stage as ``model.onnx``."""
        self._jvm_stage("setModelPayload", _PAYLOAD_INSTEAD).setModelPayload(bytearray(payload))
        return self

    def getModelPayload(self) -> bytes | None:
        """The model bytes set with :meth:`setModelPayload` or loaded with the stage."""
        payload = self._jvm_stage("getModelPayload", _PAYLOAD_INSTEAD).getModelPayload()
        return None if payload is None else bytes(payload)

    def getModelInputs(self) -> dict[str, dict[str, Any]]:
        """The model's inputs, in order: name -> ``type``, ``shape`` (-1 where dynamic) and
        ``dimNames`` (the names of dynamic dimensions). Read once on the driver."""
        return _specs(self._jvm_stage("getModelInputs", _INSPECT_INSTEAD).getModelInputsJson())

    def getModelOutputs(self) -> dict[str, dict[str, Any]]:
        """The model's outputs, like :meth:`getModelInputs`."""
        return _specs(self._jvm_stage("getModelOutputs", _INSPECT_INSTEAD).getModelOutputsJson())
