"""Decoding encoded images like the JVM's ``ImageCodec``: the same header checks before decoding,
EXIF orientation, reduced JPEG decodes and pixel limit, so that with the same OpenCV version both
backends give the same bytes.

What the Python backend does not do: where a stage needs only a smaller image, the JVM decodes a
PNG, TIFF, BMP or GIF over the pixel limit keeping every n-th pixel of every n-th row as it reads
(Java's image readers); OpenCV's Python API decodes such a file only whole, so the Python backend
refuses it with that reason, as it refuses any image over the limit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mmlspark._engine.files import MAX_PIXELS_KEY
from mmlspark._engine.headers import (
    ImageHeader,
    exif_orientation,
    has_jpeg_end,
    hex_prefix,
    is_jpeg,
    jpeg_data_shortfall,
    read_header,
)
from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError

COLOR_MODES = ("color", "grayscale", "unchanged")
#: Formats the JVM reads subsampled (``SubsampledDecode.Formats``).
_SUBSAMPLED_FORMATS = ("png", "tiff", "bmp", "gif")


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _imread_flags(cv2: Any, mode: str, factor: int) -> int:
    if mode == "unchanged":
        return int(cv2.IMREAD_UNCHANGED)
    names = {
        ("color", 1): "IMREAD_COLOR",
        ("color", 2): "IMREAD_REDUCED_COLOR_2",
        ("color", 4): "IMREAD_REDUCED_COLOR_4",
        ("color", 8): "IMREAD_REDUCED_COLOR_8",
        ("grayscale", 1): "IMREAD_GRAYSCALE",
        ("grayscale", 2): "IMREAD_REDUCED_GRAYSCALE_2",
        ("grayscale", 4): "IMREAD_REDUCED_GRAYSCALE_4",
        ("grayscale", 8): "IMREAD_REDUCED_GRAYSCALE_8",
    }
    name = names.get((mode, factor))
    if name is None:
        raise ValueError(f"unsupported decode options ({mode},{factor})")
    # Orientation is applied after, from our own EXIF reading, so that all modes agree.
    return int(getattr(cv2, name)) | int(cv2.IMREAD_IGNORE_ORIENTATION)


def _decode_factor(
    header: ImageHeader | None, mode: str, orientation: int, reduce: int, min_h: int, min_w: int
) -> tuple[int, bool]:
    """The scale to decode at, and whether the codec scales (JPEG's DCT scaling)."""
    wanted = min_h > 0 or min_w > 0
    scaled = header is not None and header.scalable and mode != "unchanged"
    if header is not None and scaled and wanted:
        width, height = (
            (header.height, header.width) if orientation >= 5 else (header.width, header.height)
        )
        for f in (8, 4, 2):
            if _ceil_div(width, f) >= min_w and _ceil_div(height, f) >= min_h:
                return f, scaled
        return 1, scaled
    return (1 if wanted else reduce), scaled


def _subsampled_on_jvm(header: ImageHeader, mode: str, min_h: int, min_w: int, limit: int) -> bool:
    """Whether the JVM reads this image, over the limit, keeping every n-th pixel of every n-th
    row (Java's image readers; ``SubsampledDecode``), which OpenCV's Python API cannot do."""
    if not (min_h > 0 or min_w > 0) or mode == "unchanged":
        return False
    if header.format not in _SUBSAMPLED_FORMATS:
        return False

    def fits(s: int) -> bool:
        return _ceil_div(header.width, s) >= min_w and _ceil_div(header.height, s) >= min_h

    step = 1
    while fits(step + 1) and step + 1 <= max(header.width, header.height):
        step += 1
    pixels = _ceil_div(header.width, step) * _ceil_div(header.height, step)
    return step > 1 and pixels <= limit


def _smaller(header: ImageHeader) -> str:
    """How an image over the limit can be decoded smaller, by what its format allows (the JVM's
    ``ImageCodec.smaller``)."""
    if header.scalable:
        return row_message("smallerJpeg")
    if header.format in _SUBSAMPLED_FORMATS:
        return row_message("smallerSubsampled", format=header.format.upper())
    return ""


def decode(
    data: bytes | None,
    mode: str,
    apply_orientation: bool,
    reduce: int,
    min_h: int,
    min_w: int,
    limit: int,
    read_as: tuple[int, int, int] | None = None,
) -> np.ndarray:
    """Decodes encoded image bytes like the JVM's ``ImageCodec.decode``: refused from the header
    when over ``limit`` pixels, at the smallest JPEG scale covering ``min_h`` x ``min_w`` when
    either is positive (else at 1/``reduce``), EXIF orientation applied. `read_as`, a
    (reduce, min_h, min_w) of its own: the bytes are first checked as a decode at that scale would
    check them (the JVM's ``ImageCodec.prepare``), so that a file is refused with the reason a read
    at that scale gives, whatever scale it is then decoded at."""
    import cv2

    if read_as is not None:
        _prepare(data, mode, apply_orientation, *read_as, limit)
    orientation, factor, header = _prepare(
        data, mode, apply_orientation, reduce, min_h, min_w, limit
    )
    assert data is not None
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), _imread_flags(cv2, mode, factor))
    if decoded is None or decoded.size == 0:
        raise RowError(row_message("notDecodable", bytes=len(data), prefix=hex_prefix(data)))
    if header is None and decoded.shape[0] * decoded.shape[1] > limit:
        height, width = decoded.shape[:2]
        raise RowError(
            row_message(
                "decodedOverLimit",
                width=width,
                height=height,
                pixels=width * height,
                limit=limit,
                key=MAX_PIXELS_KEY,
            )
        )
    if mode == "unchanged" and factor > 1:
        size = (math.ceil(decoded.shape[1] / factor), math.ceil(decoded.shape[0] / factor))
        decoded = cv2.resize(decoded, size, interpolation=cv2.INTER_AREA)
    return orient(decoded, orientation)


def _prepare(
    data: bytes | None,
    mode: str,
    apply_orientation: bool,
    reduce: int,
    min_h: int,
    min_w: int,
    limit: int,
) -> tuple[int, int, ImageHeader | None]:
    """The checks of `decode` before any pixel is decoded; the EXIF orientation, the scale to
    decode at and the header."""
    if data is None:
        raise RowError(row_message("noData"))
    if len(data) == 0:
        raise RowError(row_message("emptyFile"))
    jpeg = is_jpeg(data)
    if jpeg and not has_jpeg_end(data):
        raise RowError(row_message("truncatedJpeg", bytes=len(data)))
    orientation = exif_orientation(data) if apply_orientation and jpeg else 1
    header = read_header(data)
    factor, scaled = _decode_factor(header, mode, orientation, reduce, min_h, min_w)
    if header is not None:
        decoded_pixels = (
            _ceil_div(header.width, factor) * _ceil_div(header.height, factor)
            if scaled
            else header.pixels
        )
        if decoded_pixels > limit and _subsampled_on_jvm(header, mode, min_h, min_w, limit):
            raise RowError(
                row_message(
                    "overLimitWhole",
                    width=header.width,
                    height=header.height,
                    pixels=header.pixels,
                    limit=limit,
                    format=header.format.upper(),
                    minHeight=min_h,
                    minWidth=min_w,
                    key=MAX_PIXELS_KEY,
                )
            )
        if decoded_pixels > limit:
            at_scale = (
                row_message("atScale", pixels=decoded_pixels, factor=factor)
                if scaled and factor > 1
                else ""
            )
            raise RowError(
                row_message(
                    "overLimit",
                    width=header.width,
                    height=header.height,
                    pixels=header.pixels,
                    atScale=at_scale,
                    limit=limit,
                    smaller=_smaller(header),
                    key=MAX_PIXELS_KEY,
                )
            )
    # After the limit: a header over it is refused as such, whatever follows it.
    short = jpeg_data_shortfall(data) if jpeg else None
    if short is not None:
        have, need, blocks = short
        raise RowError(row_message("corruptJpeg", have=have, blocks=blocks, need=need))
    return orientation, factor, header


def orient(image: np.ndarray, orientation: int) -> np.ndarray:
    """Applies an EXIF orientation (1-8) the way OpenCV's own reader does."""
    import cv2

    if orientation in (2, 3, 4):
        return cv2.flip(image, {2: 1, 3: -1, 4: 0}[orientation])
    if orientation in (5, 6, 7, 8):
        transposed = cv2.transpose(image)
        if orientation == 5:
            return transposed
        return cv2.flip(transposed, {6: 1, 7: -1, 8: 0}[orientation])
    return image
