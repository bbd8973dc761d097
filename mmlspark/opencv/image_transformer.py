"""ImageTransformer with the fluent API for adding operations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mmlspark.opencv._ImageTransformer import _ImageTransformer

# OpenCV's INTER_LINEAR, the interpolation resize uses unless told otherwise.
_INTER_LINEAR = 1


class ImageTransformer(_ImageTransformer):
    """Applies a chain of OpenCV operations to an image column, in the order they are added.

    Each method below appends one operation (kept in the ``operations`` param as JSON) and
    returns the transformer, so calls chain. With ``toTensor=True`` the output is a flat
    float array in CHW layout, channels in ``tensorChannelOrder`` (RGB by default), ready for
    an ONNX image model; its shape is in the column metadata under ``tensorShape``.

    Examples
    --------
    >>> tf = (ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
    ...       .resize(size=256, keepAspectRatio=True)
    ...       .centerCrop(224, 224)
    ...       .normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225],
    ...                  colorScaleFactor=1 / 255))  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_ImageTransformer.__doc__ or "")

    def getOps(self) -> list[dict[str, Any]]:
        """The operations, in order, as dictionaries with an ``op`` key."""
        ops: list[dict[str, Any]] = json.loads(self.getOperations())
        return ops

    def _add(self, op: str, **args: Any) -> ImageTransformer:
        return self.setOperations(json.dumps(self.getOps() + [{"op": op, **args}]))

    def resize(
        self,
        height: int | None = None,
        width: int | None = None,
        *,
        size: int | None = None,
        keepAspectRatio: bool = False,
        interpolation: int = _INTER_LINEAR,
    ) -> ImageTransformer:
        """Resizes to ``height`` x ``width``; or, given ``size``, the shorter side to ``size``
        keeping the aspect ratio (``keepAspectRatio=True``) or to ``size`` x ``size``."""
        if size is not None:
            if height is not None or width is not None:
                raise ValueError("resize: give either height and width, or size")
            if keepAspectRatio:
                return self._add("resizeShorter", size=size, interpolation=interpolation)
            height = width = size
        if height is None or width is None:
            raise ValueError("resize: give height and width, or size")
        return self._add("resize", height=height, width=width, interpolation=interpolation)

    def crop(self, x: int, y: int, height: int, width: int) -> ImageTransformer:
        """Keeps the ``height`` x ``width`` region whose top-left corner is (``x``, ``y``)."""
        return self._add("crop", x=x, y=y, height=height, width=width)

    def centerCrop(self, height: int, width: int) -> ImageTransformer:
        """Keeps the central ``height`` x ``width`` region."""
        return self._add("centerCrop", height=height, width=width)

    def colorFormat(self, format: str) -> ImageTransformer:
        """Converts the channels to ``"RGB"``, ``"BGR"`` or ``"GRAY"`` (alpha is dropped)."""
        return self._add("colorFormat", format=format)

    def flip(self, flipCode: int = 1) -> ImageTransformer:
        """Flips around the x axis (0), the y axis (1, left-right) or both (-1)."""
        return self._add("flip", flipCode=flipCode)

    def blur(self, height: int, width: int) -> ImageTransformer:
        """Box blur with a ``height`` x ``width`` kernel."""
        return self._add("blur", height=height, width=width)

    def threshold(self, threshold: float, maxVal: float, thresholdType: int) -> ImageTransformer:
        """OpenCV ``threshold`` with a THRESH_* type (0 binary ... 4 to-zero inverted)."""
        return self._add(
            "threshold", threshold=threshold, maxVal=maxVal, thresholdType=thresholdType
        )

    def gaussianKernel(self, apertureSize: int, sigma: float) -> ImageTransformer:
        """Gaussian blur with an odd ``apertureSize`` and standard deviation ``sigma``."""
        return self._add("gaussianKernel", apertureSize=apertureSize, sigma=sigma)

    def normalize(
        self, mean: Sequence[float], std: Sequence[float], colorScaleFactor: float = 1.0
    ) -> ImageTransformer:
        """``(pixel * colorScaleFactor - mean[c]) / std[c]`` in float32; ``mean`` and ``std``
        list the channels in RGB order (one value applies to all channels)."""
        return self._add(
            "normalize",
            mean=[float(m) for m in mean],
            std=[float(s) for s in std],
            colorScaleFactor=float(colorScaleFactor),
        )
