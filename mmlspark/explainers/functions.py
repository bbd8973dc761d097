"""Pictures of image explanations: the weights of ImageLIME or ImageSHAP laid over the photo as a
heatmap (red where a superpixel raised the score explained, blue where it lowered it, the more
opaque the larger the weight), as an array or a PNG file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["heatmap", "superpixel_labels", "write_heatmap"]

#: The colours of positive and negative weights (BGR, as OpenCV and the image structs keep them).
POSITIVE = (0, 0, 255)
NEGATIVE = (255, 0, 0)


def _field(value: Any, name: str) -> Any:
    return value[name] if isinstance(value, Mapping) else getattr(value, name)


def superpixel_labels(superpixels: Any) -> np.ndarray:
    """Each pixel's superpixel as a ``height x width`` int array, from the explainers'
    ``superpixelCol`` value (a Row or dict of ``height``, ``width``, ``labels``) or an array."""
    if isinstance(superpixels, np.ndarray):
        if superpixels.ndim != 2:
            raise ValueError(
                f"superpixels must be a 2-d label array, got shape {superpixels.shape}"
            )
        return superpixels.astype(np.int32, copy=False)
    height, width = int(_field(superpixels, "height")), int(_field(superpixels, "width"))
    labels = np.asarray(_field(superpixels, "labels"), dtype=np.int32)
    if labels.size != height * width:
        raise ValueError(
            f"superpixels of {height}x{width} must have {height * width} labels, got {labels.size}"
        )
    return labels.reshape(height, width)


def _pixels(image: Any) -> np.ndarray:
    """BGR(A) or gray uint8 pixels from an array, an image struct (Row or dict) or encoded
    bytes."""
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    if isinstance(image, np.ndarray):
        pixels = image
    elif isinstance(image, bytes | bytearray | memoryview):
        decoded = cv2.imdecode(np.frombuffer(bytes(image), np.uint8), cv2.IMREAD_COLOR)
        if decoded is None:
            raise ValueError("image: the bytes are not an image OpenCV can decode")
        pixels = decoded
    else:
        from mmlspark._engine.structs import struct_array

        struct = image.asDict() if hasattr(image, "asDict") else image
        pixels = struct_array(struct)
    if pixels.dtype != np.uint8:
        raise ValueError(f"image: 8-bit pixels expected, got {pixels.dtype}")
    if pixels.ndim == 2 or pixels.shape[2] == 1:
        return cv2.cvtColor(pixels.reshape(pixels.shape[0], pixels.shape[1]), cv2.COLOR_GRAY2BGR)
    return pixels[:, :, :3]


def heatmap(
    image: Any,
    superpixels: Any,
    weights: Sequence[float] | np.ndarray | Any,
    *,
    alpha: float = 0.6,
) -> np.ndarray:
    """The photo with each superpixel tinted by its weight: red for a positive weight, blue for
    a negative one, opacity ``alpha * |weight| / max |weight|``.

    Parameters
    ----------
    image
        The photo: a ``height x width x channels`` uint8 array in BGR order (OpenCV's), an image
        struct (a Row or dict, as ``read_images`` gives), or encoded bytes (a JPEG, a PNG).
    superpixels
        The explainer's ``superpixelCol`` value, or a 2-d array of superpixel indices. Computed
        on the image the model sees (often smaller): the labels are scaled to the photo (nearest
        neighbour).
    weights
        One vector of ``outputCol`` (one target class): ImageLIME's K coefficients, or
        ImageSHAP's ``[base value, phi_1, ..., phi_K]`` (the base value is dropped).
    alpha
        The opacity of the largest weight's colour, in [0, 1].

    Returns
    -------
    numpy.ndarray
        ``height x width x 3`` uint8, BGR, the photo's size: ready for ``cv2.imwrite`` or
        :func:`write_heatmap`.
    """
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    labels = superpixel_labels(superpixels)
    count = int(labels.max()) + 1
    values = np.asarray(weights.toArray() if hasattr(weights, "toArray") else weights, float)
    if values.ndim != 1 or len(values) not in (count, count + 1):
        raise ValueError(
            f"weights must have one value per superpixel ({count}, or {count + 1} with "
            f"ImageSHAP's base value first), got shape {values.shape}"
        )
    if len(values) == count + 1:
        values = values[1:]
    pixels = _pixels(image)
    height, width = pixels.shape[:2]
    if labels.shape != (height, width):
        labels = cv2.resize(labels, (width, height), interpolation=cv2.INTER_NEAREST)
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    strength = np.abs(values) / scale if scale > 0 else np.zeros_like(values)
    opacity = (alpha * strength[labels])[:, :, None]
    colours = np.where(
        (values >= 0)[:, None], np.array(POSITIVE, float)[None, :], np.array(NEGATIVE, float)
    )
    tinted = pixels.astype(np.float64) * (1.0 - opacity) + colours[labels] * opacity
    return np.clip(np.rint(tinted), 0, 255).astype(np.uint8)


def write_heatmap(
    path: str | os.PathLike[str],
    image: Any,
    superpixels: Any,
    weights: Sequence[float] | np.ndarray | Any,
    *,
    alpha: float = 0.6,
) -> str:
    """Writes :func:`heatmap`'s picture to `path` as a PNG file (the folder must exist); returns
    the path."""
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    picture = heatmap(image, superpixels, weights, alpha=alpha)
    ok, encoded = cv2.imencode(".png", picture)
    if not ok:
        raise ValueError("write_heatmap: OpenCV could not encode the picture as PNG")
    target = os.fspath(path)
    with open(target, "wb") as file:
        file.write(encoded.tobytes())
    return target
