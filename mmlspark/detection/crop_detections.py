"""CropDetections, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from mmlspark.detection._CropDetections import _CropDetections


class CropDetections(_CropDetections):
    """Turns detections into crops, one row per detection: each detection of ``detectionsCol``
    (as :class:`ObjectDetector` writes them) with ``conf`` at least ``confidenceThreshold`` and,
    when ``categories`` is set, a category among them, becomes a row with the other input
    columns, the detection's index (``detectionIndexCol``), the detection (``detectionCol``) and
    the crop of the image at its full resolution (``outputCol``, an image struct). With
    ``square``, crops are widened to squares around their boxes and padded with black where the
    image ends; with ``keepUncropped``, an image none of whose detections is cropped stays as one
    row of nulls. It runs on the JVM (the mmlspark jar) or, where no jar can be loaded, on the
    Python backend (opencv-python in Arrow UDFs), with the same rows, pixels and errors.

    Examples
    --------
    >>> crops = CropDetections(inputCol="image", confidenceThreshold=0.2, categories=["1"],
    ...                        square=True).transform(detected)  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_CropDetections.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        """One row per crop, from an Arrow UDF (mmlspark._engine.crops)."""
        from mmlspark.detection import _backend

        return _backend.transform_crops(self, dataset)

    @staticmethod
    def region(height: int, width: int, bbox: list[float], square: bool) -> Any:
        """Where the crop of `bbox` ([x_min, y_min, width, height] as fractions, as detections
        give it) lies in a `height` x `width` image, as this stage cuts it: the image's pixels
        [x, x + width) x [y, y + height), placed at (left, top) of a crop of crop_width x
        crop_height (a square crop padded with black where the image ends). A ValueError, with
        the stage's row error, for a box that crops nothing."""
        from mmlspark._engine.crops import crop_region

        return crop_region(height, width, bbox, square)
