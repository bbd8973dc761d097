"""The model bytes and introspection shared by the stages that run an ONNX model."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from mmlspark._engine.messages import row_message
from mmlspark.core.wrapper import ConnectNotSupportedError, require_java_obj

_S = TypeVar("_S", bound="HasModelPayload")


_PAYLOAD_INSTEAD = "give the model as modelLocation, a path the Connect server can read"
_INSPECT_INSTEAD = "read the model file with mmlspark.onnx.inspect_model(path) instead"


def _specs(text: str) -> dict[str, dict[str, Any]]:
    return {spec.pop("name"): spec for spec in json.loads(text)}


def with_external_data(stage: Any, data: bytes, folder: str, source: str) -> bytes:
    """The model `data` read from `source` with the tensor data it keeps in files of `folder`
    (ONNX external data) read in, for the Python backend, which holds a model as bytes; a refusal
    names the stage."""
    # An external-data entry holds the key "location" (field 1, 8 bytes): without those bytes the
    # model keeps no external data, and is not parsed.
    if b"\n\x08location" not in data:
        return data
    from mmlspark.onnx._graph import inline_external_data

    try:
        return inline_external_data(data, folder, source)
    except ValueError as error:
        raise ValueError(f"{type(stage).__name__}: {error}") from None


class HasModelPayload:
    """Methods of a JVM stage that holds an ONNX model (``mmlspark.onnx.HasOnnxModel``)."""

    _java_obj: Any
    _on_python: Callable[[], bool]

    def _jvm_stage(self, feature: str, instead: str) -> Any:
        return require_java_obj(self, f"{type(self).__name__}.{feature}", instead)

    def setBackend(self, name: str) -> Any:
        """Runs this stage on another backend (see ``MMLParams.setBackend``), keeping the model
        bytes set with :meth:`setModelPayload`, which each backend holds in its own place."""
        try:
            payload = self.getModelPayload()
        except ConnectNotSupportedError:  # a stage on a Connect server: its bytes stay there
            payload = None
        super().setBackend(name)  # type: ignore[misc]
        if payload is not None and self.getModelPayload() != payload:
            self.setModelPayload(payload)
        return self

    def setModelPayload(self: _S, payload: bytes) -> _S:
        """Sets the model from its bytes (an ONNX file's content); takes precedence over
        ``modelLocation`` and is saved with the stage as ``model.onnx``."""
        if self._on_python():  # the Python backend holds the bytes itself
            self._python_payload = bytes(payload)
            return self
        self._jvm_stage("setModelPayload", _PAYLOAD_INSTEAD).setModelPayload(bytearray(payload))
        return self

    def getModelPayload(self) -> bytes | None:
        """The model bytes set with :meth:`setModelPayload` or loaded with the stage."""
        if self._on_python():
            return getattr(self, "_python_payload", None)
        payload = self._jvm_stage("getModelPayload", _PAYLOAD_INSTEAD).getModelPayload()
        return None if payload is None else bytes(payload)

    def _model_bytes(self) -> bytes:
        """The model the Python backend runs: the payload, else the file at ``modelLocation``
        (a path the driver reads)."""
        payload = self.getModelPayload()
        if payload is not None:
            return payload
        location = self._spec().modelLocation  # type: ignore[attr-defined]
        if location is None:
            uid = self._spec().uid  # type: ignore[attr-defined]
            raise ValueError(f"{type(self).__name__} {uid}: {row_message('noModel')}")
        local = location.removeprefix("file:")
        try:
            with open(local, "rb") as f:
                data = f.read()
        except OSError as error:
            raise ValueError(
                f"{type(self).__name__}: the Python backend reads modelLocation on the driver and "
                f"cannot read '{location}' ({error.strerror}); give a local path or the bytes "
                "(setModelPayload)"
            ) from None
        return with_external_data(self, data, os.path.dirname(os.path.abspath(local)), location)

    def _model_what(self) -> str:
        """The model as the stage's messages name it (``HasOnnxModel.modelInfo``)."""
        spec = self._spec()  # type: ignore[attr-defined]
        name = f"{type(self).__name__} {spec.uid}: the model"
        if self.getModelPayload() is not None:
            return f"{name} payload"
        return f"{name} at '{spec.modelLocation}'"

    def _load_model_file(self, data: bytes, folder: str, source: str) -> None:
        """Holds the model `data` of the saved stage's file `source` (in `folder`) as its payload
        on the Python backend (mmlspark.core.persistence loads the stage)."""
        # A JVM save of a model with external data holds its files beside model.onnx.
        self._python_payload = with_external_data(self, data, folder, source)

    def getModelInputs(self) -> dict[str, dict[str, Any]]:
        """The model's inputs, in order: name -> ``type``, ``shape`` (-1 where dynamic) and
        ``dimNames`` (the names of dynamic dimensions). Read once on the driver."""
        if self._on_python():
            return _python_specs(self._model_bytes(), inputs=True)
        return _specs(self._jvm_stage("getModelInputs", _INSPECT_INSTEAD).getModelInputsJson())

    def getModelOutputs(self) -> dict[str, dict[str, Any]]:
        """The model's outputs, like :meth:`getModelInputs`."""
        if self._on_python():
            return _python_specs(self._model_bytes(), inputs=False)
        return _specs(self._jvm_stage("getModelOutputs", _INSPECT_INSTEAD).getModelOutputsJson())


def _python_specs(model: bytes, inputs: bool) -> dict[str, dict[str, Any]]:
    """getModelInputs/getModelOutputs read with onnxruntime (the Python backend), named as the
    JVM stage names them."""
    from mmlspark._engine.ort import described

    return described(model, inputs)
