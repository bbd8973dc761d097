"""ImageLIME, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.explainers import _image_backend
from mmlspark.explainers._ImageLIME import _ImageLIME
from mmlspark.explainers.explainer import Explainer


class ImageLIME(Explainer, _ImageLIME):
    """LIME for the superpixels of each image in ``inputCol`` (an image struct or encoded bytes):
    each of ``numSamples`` samples keeps every superpixel with probability ``samplingFraction``
    and turns the others black (the first keeps them all); the samples are scored by the model,
    weighted by ``sqrt(exp(-d^2 / kernelWidth^2))`` (d^2 the number of superpixels turned off)
    and fitted by a weighted ridge regression. Per target class, a vector of one coefficient per
    superpixel; in ``metricsCol`` the weighted r2 of the fit; in ``superpixelCol`` the
    superpixels (``mmlspark.explainers.heatmap`` draws them with the weights).

    Examples
    --------
    >>> lime = ImageLIME(inputCol="image", model=model, targetCol="probability",
    ...                  targetClasses=[3], numSamples=300, cellSize=24.0)  # doctest: +SKIP
    >>> lime.transform(photos)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_ImageLIME.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        return _image_backend.explain(
            self,
            spec,
            dataset,
            {
                "kind": "lime",
                "samples": spec.numSamples,
                "fraction": float(spec.samplingFraction),
                "width": spec.kernelWidth,
                "penalty": float(spec.regularization),
            },
        )
