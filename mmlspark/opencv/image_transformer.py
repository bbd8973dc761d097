"""ImageTransformer with the fluent API for adding operations."""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pyspark.sql.types import DataType, FloatType

from mmlspark.core.aliases import renamed_keywords
from mmlspark.opencv._ImageOps import INTER_LINEAR, OPERATIONS, _ImageOps
from mmlspark.opencv._ImageTransformer import _ImageTransformer

_T = TypeVar("_T", bound="ImageTransformer")

# Keyword spellings SynapseML's fluent methods take that are not the snake_case of ours.
_SYNAPSEML_KEYWORDS = {"appertureSize": "apertureSize", "apperture_size": "apertureSize"}


def _camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def _any_spelling(method: Callable[..., Any]) -> Callable[..., Any]:
    """Lets a fluent method take its keywords in snake_case (``color_scale_factor``) and in
    SynapseML's spellings (``appertureSize``) as well as ours."""

    @functools.wraps(method)
    def fluent(self: Any, *args: Any, **kwargs: Any) -> Any:
        renamed = renamed_keywords(
            method.__name__, kwargs, lambda k: _SYNAPSEML_KEYWORDS.get(k, _camel(k))
        )
        return method(self, *args, **renamed)

    return fluent


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
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        from mmlspark.opencv import _backend

        return _backend.transform_images(self, dataset)

    def __init__(self, **kwargs: Any) -> None:
        if "stages" in kwargs:
            raise TypeError(
                "ImageTransformer takes its operations through the fluent methods "
                "(.resize(...).crop(...) ...) or the 'operations' param (JSON); SynapseML's "
                "'stages' list of maps is not read"
            )
        super().__init__(**kwargs)

    def getOps(self) -> list[dict[str, Any]]:
        """The operations, in order, as dictionaries with an ``op`` key."""
        ops: list[dict[str, Any]] = json.loads(self.getOperations())
        return ops

    def _add(self: _T, op: str, **args: Any) -> _T:
        return self.setOperations(json.dumps(self.getOps() + [{"op": op, **args}]))

    def resize(  # type: ignore[override]
        self: _T,
        height: int | None = None,
        width: int | bool | None = None,
        *,
        size: int | Sequence[int] | None = None,
        keepAspectRatio: bool = False,
        interpolation: int = INTER_LINEAR,
    ) -> _T:
        """Resizes to ``height`` x ``width``; or, given ``size``, the shorter side to ``size``
        keeping the aspect ratio (``keepAspectRatio=True``) or to ``size`` x ``size``.

        SynapseML's forms work too: ``resize(224, True)`` is ``resize(size=224,
        keepAspectRatio=True)``, and ``size=(height, width)`` is ``resize(height, width)``."""
        if isinstance(width, bool):  # resize(size, keepAspectRatio)
            if size is not None:
                raise ValueError("resize: give either size and keepAspectRatio, or size=")
            size, keepAspectRatio = height, width
            height = width = None
        if size is not None and not isinstance(size, int):
            if len(size) != 2 or keepAspectRatio:
                raise ValueError(
                    "resize: a sequence size is (height, width), without keepAspectRatio; "
                    f"got size={size!r}"
                )
            if height is not None or width is not None:
                raise ValueError("resize: give either height and width, or size")
            height, width, size = int(size[0]), int(size[1]), None
        if size is not None:
            if height is not None or width is not None:
                raise ValueError("resize: give either height and width, or size")
            if keepAspectRatio:
                return self._resizeShorter(size, interpolation)
            height = width = size
        if height is None or width is None:
            raise ValueError("resize: give height and width, or size")
        return super().resize(height, width, interpolation)

    def normalize(  # type: ignore[override]
        self: _T,
        mean: Sequence[float],
        std: Sequence[float],
        colorScaleFactor: float = 1.0,
    ) -> _T:
        """Normalizes (see ``_ImageOps.normalize``) and, unless ``toTensor`` was set, makes the
        output a tensor, as SynapseML's ``normalize`` does."""
        stage = super().normalize(mean, std, colorScaleFactor)
        return stage if stage.isSet(stage.toTensor) else stage.setToTensor(True)

    def setTensorElementType(self: _T, value: DataType | str) -> _T:
        """SynapseML's tensor element type. The tensor is always float32 here, so only
        ``FloatType()`` (or ``"float"``) is accepted; convert the column to reach doubles."""
        name = value.simpleString() if isinstance(value, DataType) else str(value).lower()
        if name != FloatType().simpleString():
            raise ValueError(
                f"ImageTransformer tensors are float32; tensorElementType {name!r} is not "
                "supported (SynapseML's DoubleType: cast the output column to array<double>)"
            )
        return self


for _spec in OPERATIONS.values():
    _name = _spec["method"]
    setattr(ImageTransformer, _name, _any_spelling(getattr(ImageTransformer, _name)))

# The constructor keeps the generated keyword-only signature for help() and inspect.
ImageTransformer.__init__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    _ImageTransformer.__init__
)
