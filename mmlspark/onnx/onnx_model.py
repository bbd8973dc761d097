"""ONNXModel with dictionary setters, model bytes and model introspection."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mmlspark.onnx._ONNXModel import _ONNXModel
from mmlspark.onnx.model_payload import HasModelPayload

# Params holding a JSON object of strings; their Python setters also take a dict.
_MAPPING_PARAMS = ("feedDict", "fetchDict", "softMaxDict", "argMaxDict")


class ONNXModel(HasModelPayload, _ONNXModel):
    """Runs an ONNX model with ONNX Runtime over a DataFrame, a mini-batch of rows per run.

    Give the model as a path (``modelLocation``: local, HDFS, S3, ... read once per executor) or
    as bytes (:meth:`setModelPayload`). Map model inputs to columns with ``feedDict`` and new
    columns to model outputs with ``fetchDict`` (dicts or JSON); a model with one input and one
    output needs only ``inputCol`` and ``outputCol``. Each executor creates one ONNX Runtime
    session per model and shares it among its tasks; rows whose input is null or the wrong size
    get null outputs and a message in ``errorCol``.

    Examples
    --------
    >>> model = ONNXModel(modelLocation="/models/classifier.onnx",
    ...                   feedDict={"image": "tensor"}, fetchDict={"logits": "logits"},
    ...                   softMaxDict={"logits": "probability"},
    ...                   argMaxDict={"logits": "prediction"})  # doctest: +SKIP
    >>> model.getModelInputs()  # doctest: +SKIP
    {'image': {'type': 'float', 'shape': [-1, 3, 224, 224], 'dimNames': ['N', '', '', '']}}
    >>> scored = model.transform(tensors)  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_ONNXModel.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        from mmlspark.onnx import _backend

        return _backend.transform(self, self._model_bytes(), dataset)

    def _set(self, **kwargs: Any) -> Any:
        for name in _MAPPING_PARAMS:
            value = kwargs.get(name)
            if isinstance(value, Mapping):
                kwargs[name] = json.dumps(
                    {str(k): str(v) for k, v in value.items()}, sort_keys=True
                )
        return super()._set(**kwargs)

    def setFeedDict(self, value: Mapping[str, str] | str) -> ONNXModel:
        """Maps each model input to the column it reads: ``{"input": "column"}``."""
        return self._set(feedDict=value)

    def setFetchDict(self, value: Mapping[str, str] | str) -> ONNXModel:
        """Maps each new column to the model output it receives: ``{"column": "output"}``."""
        return self._set(fetchDict=value)

    def setSoftMaxDict(self, value: Mapping[str, str] | str) -> ONNXModel:
        """Adds the softmax of a fetched column as a new column: ``{"fetched": "new"}``."""
        return self._set(softMaxDict=value)

    def setArgMaxDict(self, value: Mapping[str, str] | str) -> ONNXModel:
        """Adds the index of a fetched column's largest value: ``{"fetched": "new"}``."""
        return self._set(argMaxDict=value)
