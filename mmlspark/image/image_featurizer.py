"""ImageFeaturizer with the model's bytes and introspection."""

from __future__ import annotations

from mmlspark.core.aliases import synapseml_names
from mmlspark.image._ImageFeaturizer import _ImageFeaturizer
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
