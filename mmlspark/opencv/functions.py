"""SynapseML's image helpers: numpy arrays in RGB to and from image struct rows, and the image
struct's type (``ImageSchema``, e.g. the return type of a UDF that makes images)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import Row
from pyspark.sql import types as T

from mmlspark._engine.structs import struct_array

__all__ = ["ImageSchema", "toNDArray", "toImage"]


def image_struct_type() -> T.StructType:
    """Spark's image struct type as the JVM stages write it (a new object on each call)."""
    return T.StructType(
        [
            T.StructField("origin", T.StringType(), True),
            T.StructField("height", T.IntegerType(), False),
            T.StructField("width", T.IntegerType(), False),
            T.StructField("nChannels", T.IntegerType(), False),
            T.StructField("mode", T.IntegerType(), False),
            T.StructField("data", T.BinaryType(), True),
        ]
    )


#: The image struct's type, SynapseML's ``ImageSchema``: ``udf(f, ImageSchema)`` where ``f``
#: returns :func:`toImage` rows.
ImageSchema = image_struct_type()

# OpenCV type codes of 8-bit images by channel count.
_MODES = {1: 0, 3: 16, 4: 24}


def toNDArray(image: Any) -> np.ndarray:  # noqa: N802 - SynapseML's name
    """The pixels of an image struct row as a ``height x width x channels`` array in RGB (RGBA)
    order, as SynapseML's ``toNDArray`` gives them; gray images stay one channel.
    :func:`mmlspark.image.to_ndarray` gives the stored BGR order instead."""
    pixels = struct_array(image)
    return pixels if pixels.shape[2] == 1 else np.ascontiguousarray(_swap_red_blue(pixels))


def toImage(array: np.ndarray, path: str = "") -> Row:  # noqa: N802 - SynapseML's name
    """An image struct row (stored BGR, as Spark's image source and the stages expect) from an
    8-bit ``height x width`` (gray) or ``height x width x 3`` (RGB) or ``x 4`` (RGBA) array, as
    SynapseML's ``toImage`` makes it."""
    pixels = np.asarray(array)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] not in _MODES:
        raise ValueError(
            "toImage takes an 8-bit array of height x width (gray) or height x width x 3 or 4 "
            f"(RGB, RGBA); got {pixels.dtype} {pixels.shape}"
        )
    stored = pixels if pixels.shape[2] == 1 else _swap_red_blue(pixels)
    height, width, channels = stored.shape
    return Row(
        origin=path,
        height=height,
        width=width,
        nChannels=channels,
        mode=_MODES[channels],
        data=bytearray(np.ascontiguousarray(stored).tobytes()),
    )


def _swap_red_blue(pixels: np.ndarray) -> np.ndarray:
    order = [2, 1, 0] + list(range(3, pixels.shape[2]))
    return pixels[:, :, order]
