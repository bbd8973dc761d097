"""ImageSHAP, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.explainers import _image_backend
from mmlspark.explainers._ImageSHAP import _ImageSHAP
from mmlspark.explainers.explainer import Explainer


class ImageSHAP(Explainer, _ImageSHAP):
    """Kernel SHAP values of the superpixels of each image in ``inputCol`` (an image struct or
    encoded bytes): a coalition keeps its superpixels and turns the others black, so the base
    value is the model's score of the black image. Per target class, a vector ``[base value,
    phi_1, ..., phi_K]`` over the image's K superpixels (the phis sum to the image's score less
    the base value); in ``metricsCol`` the r2 of the fit; in ``superpixelCol`` the superpixels.

    Examples
    --------
    >>> shap = ImageSHAP(inputCol="image", model=model, targetCol="probability",
    ...                  targetClasses=[3], numSamples=200)  # doctest: +SKIP
    >>> shap.transform(photos)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_ImageSHAP.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        return _image_backend.explain(
            self, spec, dataset, {"kind": "shap", "samples": spec.numSamples, "fraction": 1.0}
        )
