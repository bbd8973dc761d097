"""Spark's image struct (``origin, height, width, nChannels, mode, data``) to and from numpy, as
the JVM's ``ImageSchemaUtils`` converts it: samples little-endian, row-major, OpenCV type codes."""

from __future__ import annotations

from typing import Any

import numpy as np

from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError

IMAGE_FIELDS = ("origin", "height", "width", "nChannels", "mode", "data")

_DEPTHS = {
    np.dtype(np.uint8): 0,
    np.dtype(np.int8): 1,
    np.dtype(np.uint16): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.float32): 5,
    np.dtype(np.float64): 6,
}
_DEPTH_NAMES = ("8U", "8S", "16U", "16S", "32S", "32F", "64F", "16F")
# OpenCV depth codes (type & 7) that can be read, and the numpy types of their samples.
_READABLE = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 5: np.float32}


def channels_of(image: np.ndarray) -> int:
    return 1 if image.ndim == 2 else int(image.shape[2])


def order_of(image: np.ndarray) -> str:
    """The channel order of a decoded or struct image: GRAY for one channel, else BGR(A)."""
    return "GRAY" if channels_of(image) == 1 else "BGR"


def mode_of(image: np.ndarray) -> int:
    """The OpenCV type code of `image` (CV_8UC3 = 16, ...)."""
    return _DEPTHS[image.dtype] + (channels_of(image) - 1) * 8


def to_struct(image: np.ndarray, origin: str | None) -> tuple[Any, ...]:
    """The fields of Spark's image struct for `image`: samples little-endian, row-major."""
    data = np.ascontiguousarray(image, dtype=image.dtype.newbyteorder("<")).tobytes()
    return (
        origin,
        int(image.shape[0]),
        int(image.shape[1]),
        channels_of(image),
        mode_of(image),
        data,
    )


def from_struct(row: dict[str, Any] | None) -> np.ndarray:
    """The pixels of an image struct, checked as the JVM's ``ImageSchemaUtils.toMat`` checks."""
    if row is None:
        raise RowError(row_message("noImage"))
    height, width, mode, data = row["height"], row["width"], row["mode"], row["data"]
    depth, channels = mode & 7, (mode >> 3) + 1
    if depth not in _READABLE:
        raise RowError(
            row_message("unsupportedMode", mode=mode, type=f"CV_{_DEPTH_NAMES[depth]}C{channels}")
        )
    dtype = np.dtype(_READABLE[depth]).newbyteorder("<")
    expected = height * width * channels * dtype.itemsize
    if data is None or len(data) != expected:
        found = "no" if data is None else len(data)
        raise RowError(
            "requirement failed: " + row_message("dataSize", found=found, expected=expected)
        )
    pixels = np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return pixels.reshape(shape)


def struct_array(image: Any) -> np.ndarray:
    """The pixels of an image struct row as a ``height x width x nChannels`` array
    (``mmlspark.image.to_ndarray``): 8- and 16-bit and float images; a ValueError for others."""
    depth = image["mode"] & 7
    if depth not in _READABLE:
        raise ValueError(f"unsupported OpenCV image mode {image['mode']}")
    dtype = np.dtype(_READABLE[depth]).newbyteorder("<")
    pixels = np.frombuffer(bytes(image["data"]), dtype=dtype)
    return pixels.reshape(image["height"], image["width"], image["nChannels"]).astype(
        dtype.newbyteorder("=")
    )


def unroll(pixels: np.ndarray) -> np.ndarray:
    """The samples as float64 in CHW order, channels in the image's own order."""
    planes = pixels.reshape(pixels.shape[0], pixels.shape[1], -1)
    return np.ascontiguousarray(planes.transpose(2, 0, 1), dtype=np.float64).reshape(-1)


def image_array(values: list[tuple[Any, ...] | None]) -> Any:
    """One Arrow array of image structs from :func:`to_struct`'s fields (None: a null row)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    rows = [(None, 0, 0, 0, 0, None) if v is None else v for v in values]
    types = [pa.string(), pa.int32(), pa.int32(), pa.int32(), pa.int32(), pa.binary()]
    arrays = [pa.array([row[i] for row in rows], type=t) for i, t in enumerate(types)]
    mask = pa.array(np.array([v is None for v in values], dtype=bool))
    return pa.StructArray.from_arrays(arrays, names=list(IMAGE_FIELDS), mask=mask)
