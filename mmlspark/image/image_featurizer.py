"""ImageFeaturizer with the model's bytes and introspection."""

from __future__ import annotations

import inspect
from typing import Any

from mmlspark.image._ImageFeaturizer import _ImageFeaturizer
from mmlspark.onnx.model_payload import HasModelPayload


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

    # SynapseML's names for the normalization params.
    _ALIASES = {
        "channelNormalizationMeans": "channelMeans",
        "channelNormalizationStds": "channelStds",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**self._renamed(kwargs))

    def setParams(self, **kwargs: Any) -> ImageFeaturizer:  # type: ignore[override]
        super().setParams(**self._renamed(kwargs))
        return self

    @classmethod
    def _renamed(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        renamed = {cls._ALIASES.get(k, k): v for k, v in kwargs.items()}
        if len(renamed) < len(kwargs):
            raise TypeError(f"ImageFeaturizer: a param given under two names in {sorted(kwargs)}")
        return renamed

    def setChannelNormalizationMeans(self, value: list[float]) -> ImageFeaturizer:
        """SynapseML's name for :meth:`setChannelMeans`."""
        return self.setChannelMeans(value)

    def setChannelNormalizationStds(self, value: list[float]) -> ImageFeaturizer:
        """SynapseML's name for :meth:`setChannelStds`."""
        return self.setChannelStds(value)

    def getChannelNormalizationMeans(self) -> list[float]:
        """SynapseML's name for :meth:`getChannelMeans`."""
        return self.getChannelMeans()

    def getChannelNormalizationStds(self) -> list[float]:
        """SynapseML's name for :meth:`getChannelStds`."""
        return self.getChannelStds()


def _with_aliases(method: Any) -> inspect.Signature:
    """The generated keyword-only signature of `method`, with SynapseML's names added."""
    signature = inspect.signature(method)
    extra = [
        inspect.Parameter(
            alias, inspect.Parameter.KEYWORD_ONLY, default=None, annotation="list[float] | None"
        )
        for alias in ImageFeaturizer._ALIASES
    ]
    return signature.replace(parameters=[*signature.parameters.values(), *extra])


ImageFeaturizer.__init__.__signature__ = _with_aliases(_ImageFeaturizer.__init__)  # type: ignore[attr-defined]
ImageFeaturizer.setParams.__signature__ = _with_aliases(_ImageFeaturizer.setParams)  # type: ignore[attr-defined]
