"""ImageFeaturizer with the model's bytes and introspection."""

from __future__ import annotations

from typing import Any

from mmlspark.core.aliases import synapseml_names
from mmlspark.onnx._ImageFeaturizer import _ImageFeaturizer
from mmlspark.onnx.model_payload import HasModelPayload

_CUT = (
    "featureTensorName names the node or tensor to cut the ONNX model at (unset: the whole model)"
)


@synapseml_names(
    {
        "channelNormalizationMeans": "channelMeans",
        "channelNormalizationStds": "channelStds",
    },
    refused={
        "model": "there is no model zoo (no downloads); export the network to ONNX and pass "
        "modelLocation (a path) or setModelPayload(bytes), with " + _CUT,
        "headless": _CUT,
        "cutOutputLayers": _CUT,
    },
)
class ImageFeaturizer(HasModelPayload, _ImageFeaturizer):
    """Turns an image column into feature vectors with an ONNX image model cut at an
    intermediate node (transfer learning's headless featurizer), in one stage.

    Images are resized to ``imageHeight`` x ``imageWidth``, scaled and normalized per channel
    into a CHW tensor, and run through the model up to ``featureTensorName`` (a node or tensor
    of its graph; the library cuts the graph there). The output is an ML vector, ready for
    ``pyspark.ml.classification.LogisticRegression`` and friends.

    Examples
    --------
    >>> from pyspark.ml import Pipeline
    >>> from pyspark.ml.classification import LogisticRegression
    >>> featurizer = ImageFeaturizer(modelLocation="/models/resnet50.onnx",
    ...                              featureTensorName="pooled")  # doctest: +SKIP
    >>> pipeline = Pipeline(stages=[featurizer,
    ...                             LogisticRegression(featuresCol="features")])  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_ImageFeaturizer.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        """The JVM stage's two steps on the Python backend: ImageTransformer to a CHW tensor,
        then ONNXModel on the model cut at ``featureTensorName`` (with the ``onnx`` package)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from mmlspark.onnx import ONNXModel
        from mmlspark.onnx._graph import cut
        from mmlspark.opencv import ImageTransformer
        from mmlspark.opencv._backend import check_input, is_image

        name = f"ImageFeaturizer {self.uid}"
        spec = self._spec()
        field = check_input(
            self,
            dataset.schema,
            lambda t: isinstance(t, T.BinaryType) or is_image(t),
            "an image struct (origin, height, width, nChannels, mode, data) or encoded image "
            "bytes (binary)",
        )
        error_col = spec.errorCol
        if error_col in dataset.columns:
            raise ValueError(f"{name}: output column '{error_col}' already exists")
        tensor, image_error, model_error = (
            f"__{part}_{self.uid}" for part in ("tensor", "imageError", "modelError")
        )
        bgr = spec.tensorChannelOrder.strip().upper() == "BGR"

        def rgb(values: tuple[float, ...]) -> list[float]:
            return list(reversed(values)) if bgr else list(values)

        preprocess = ImageTransformer(
            inputCol=spec.inputCol,
            outputCol=tensor,
            errorCol=image_error,
            toTensor=True,
            tensorChannelOrder=spec.tensorChannelOrder,
            reducedDecode=spec.reducedDecode,
        ).setBackend("python")
        preprocess.resize(spec.imageHeight, spec.imageWidth)
        if spec.autoConvertToColor:
            preprocess.colorFormat("BGR")
        preprocess.normalize(
            rgb(spec.channelMeans),
            rgb(spec.channelStds),
            spec.colorScaleFactor,
        )
        model = self._model_bytes()
        if spec.featureTensorName is not None:
            try:
                model = cut(model, [spec.featureTensorName])
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
        onnx = ONNXModel().setBackend("python").setModelPayload(model)
        inputs, outputs = onnx.getModelInputs(), onnx.getModelOutputs()
        if len(inputs) != 1:
            described = ", ".join(f"'{k}' ({v['type']}{v['shape']})" for k, v in inputs.items())
            raise ValueError(
                f"{name}: the featurizing model must have one input (the image tensor) but has "
                + described
            )
        onnx.setParams(
            feedDict={next(iter(inputs)): tensor},
            fetchDict={spec.outputCol: next(iter(outputs))},
            vectorOutputs=True,
            errorCol=model_error,
            miniBatchSize=spec.miniBatchSize,
            deviceType=spec.deviceType,
        )
        scored = onnx.transform(preprocess.transform(dataset))
        if isinstance(field.dataType, T.BinaryType) and not spec.ignoreDecodingErrors:
            # A filter, unlike a column, runs even when the error column is not selected.
            undecodable = F.col(image_error).isNotNull() & F.col(f"`{spec.inputCol}`").isNotNull()
            message = F.concat(
                F.lit(
                    f"{name}: an image cannot be decoded (set ignoreDecodingErrors=true to give "
                    "it a null vector and the reason in errorCol): "
                ),
                F.col(image_error),
            )
            scored = scored.filter(F.when(undecodable, F.raise_error(message)).isNull())
        out = scored.withColumn(error_col, F.coalesce(F.col(image_error), F.col(model_error))).drop(
            tensor, image_error, model_error
        )
        if spec.dropNa:
            out = out.filter(F.col(f"`{spec.outputCol}`").isNotNull())
        return out
