"""ImageTransformer with the fluent API for adding operations."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from mmlspark.opencv._ImageOps import INTER_LINEAR, _ImageOps
from mmlspark.opencv._ImageTransformer import _ImageTransformer

_T = TypeVar("_T", bound="ImageTransformer")


class ImageTransformer(_ImageOps, _ImageTransformer):
    """Applies a chain of OpenCV operations to an image column, in the order they are added.

    Each fluent method (one per image operation, generated from the JVM's registry of them in
    ``_ImageOps``) appends one operation (kept in the ``operations`` param as JSON) and returns
    the transformer, so calls chain. With ``toTensor=True`` the output is a flat float array in CHW
    layout, channels in ``tensorChannelOrder`` (RGB by default), ready for an ONNX image model;
    its shape is in the column metadata under ``tensorShape``. The OpenCV constants the
    operations take are in ``mmlspark.opencv._ImageOps`` (``INTER_LINEAR``, ``THRESH_BINARY``, ...).

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

    def _add(self: _T, op: str, **args: Any) -> _T:
        return self.setOperations(json.dumps(self.getOps() + [{"op": op, **args}]))

    def resize(  # type: ignore[override]
        self: _T,
        height: int | None = None,
        width: int | None = None,
        *,
        size: int | None = None,
        keepAspectRatio: bool = False,
        interpolation: int = INTER_LINEAR,
    ) -> _T:
        """Resizes to ``height`` x ``width``; or, given ``size``, the shorter side to ``size``
        keeping the aspect ratio (``keepAspectRatio=True``) or to ``size`` x ``size``."""
        if size is not None:
            if height is not None or width is not None:
                raise ValueError("resize: give either height and width, or size")
            if keepAspectRatio:
                return self._resizeShorter(size, interpolation)
            height = width = size
        if height is None or width is None:
            raise ValueError("resize: give height and width, or size")
        return super().resize(height, width, interpolation)
