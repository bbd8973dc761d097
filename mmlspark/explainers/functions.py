"""Pictures of image explanations: the weights of ImageLIME or ImageSHAP laid over the photo as a
heatmap (red where a superpixel raised the score explained, blue where it lowered it, the more
opaque the larger the weight), as an array or a PNG file; and the superpixels on the photo, as a
label map or as SynapseML's ``clusters`` (the pixels of each superpixel).

The superpixels are computed on the image the model sees (the model-size image); the explainers'
``superpixelCol`` struct also says where that image lies in the photo (``sourceHeight``,
``sourceWidth``, ``transform``), so that a photo pixel takes the superpixel of the model pixel it
maps to, through a resize, crop, letterbox or flip alike."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "heatmap",
    "photo_labels",
    "superpixel_clusters",
    "superpixel_labels",
    "write_heatmap",
]

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


def _optional(value: Any, name: str) -> Any:
    """`name` of a Row or dict, None where it has no such field (a struct of an older release)."""
    if isinstance(value, Mapping):
        return value.get(name)
    fields = getattr(value, "__fields__", None)
    if fields is not None:
        return value[name] if name in fields else None
    return getattr(value, name, None)


def _geometry(superpixels: Any) -> tuple[int, int, tuple[float, float, float, float]] | None:
    """The source's (height, width) and ``[ax, bx, ay, by]`` of a superpixel struct, or None for a
    label array or a struct without them."""
    if isinstance(superpixels, np.ndarray):
        return None
    names = ("sourceHeight", "sourceWidth", "transform")
    values = [_optional(superpixels, n) for n in names]
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        given = ", ".join(n for n, v in zip(names, values, strict=True) if v is not None)
        raise ValueError(
            f"superpixels: sourceHeight, sourceWidth and transform go together; only {given} given"
        )
    height, width, transform = int(values[0]), int(values[1]), np.asarray(values[2], float)
    if height <= 0 or width <= 0:
        raise ValueError(f"superpixels: the source size must be positive, got {height}x{width}")
    if transform.shape != (4,) or not np.all(np.isfinite(transform)):
        raise ValueError(
            "superpixels: transform must be 4 finite numbers [ax, bx, ay, by], got "
            f"{np.asarray(values[2]).tolist()}"
        )
    if transform[0] == 0.0 or transform[2] == 0.0:
        raise ValueError(f"superpixels: transform's scales must not be 0, got {transform.tolist()}")
    ax, bx, ay, by = (float(v) for v in transform)
    return height, width, (ax, bx, ay, by)


def _axis(size: int, source: int, scale: float, offset: float, model: int) -> np.ndarray:
    """The model pixel (-1: outside the model image) of each of `size` photo pixels along one
    axis: the pixel's centre scaled to the source's `source` pixels, then mapped."""
    centres = (np.arange(size, dtype=np.float64) + 0.5) * (source / size)
    index = np.floor(scale * centres + offset)
    return np.where((index >= 0) & (index < model), index, -1).astype(np.int64)


def photo_labels(
    superpixels: Any, height: int | None = None, width: int | None = None
) -> np.ndarray:
    """The superpixel of each pixel of the photo, ``height x width`` int32, -1 where the model
    did not see it (cropped away, or outside a letterbox's image).

    Parameters
    ----------
    superpixels
        The explainers' ``superpixelCol`` value (a Row or dict), or a 2-d label array.
    height, width
        The photo's size (both or neither); by default the source's (the image in ``inputCol``
        at full resolution). A photo of another size (a reduced decode, a thumbnail) is mapped
        through the source's coordinates, scaled; it must have the source's aspect ratio.
        A label array, or a struct without ``transform`` (an older release's), is scaled to the
        size by nearest neighbour, as if the model saw the whole photo stretched.
    """
    if (height is None) != (width is None):
        raise ValueError("photo_labels: give both height and width, or neither")
    labels = superpixel_labels(superpixels)
    geometry = _geometry(superpixels)
    if geometry is None:
        if height is None or width is None or labels.shape == (height, width):
            return labels
        if height <= 0 or width <= 0:
            raise ValueError(f"photo_labels: the size must be positive, got {height}x{width}")
        import cv2  # opencv-python: mmlspark[cpu] or [gpu]

        return cv2.resize(labels, (width, height), interpolation=cv2.INTER_NEAREST)
    source_h, source_w, (ax, bx, ay, by) = geometry
    h = source_h if height is None else int(height)
    w = source_w if width is None else int(width)
    if h <= 0 or w <= 0:
        raise ValueError(f"photo_labels: the size must be positive, got {h}x{w}")
    # a photo decoded at 1/2 to 1/8 has the source's size divided and rounded up: its aspect
    # ratio differs from the source's by less than a pixel; a rotated or other photo by more
    if abs(h * source_w - source_h * w) > max(source_h, source_w):
        raise ValueError(
            f"the photo is {h}x{w} (height x width) but the superpixels' source is "
            f"{source_h}x{source_w}: not the same photo, or rotated (EXIF orientation?)"
        )
    rows = _axis(h, source_h, ay, by, labels.shape[0])
    cols = _axis(w, source_w, ax, bx, labels.shape[1])
    mapped = labels[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))]
    return np.where((rows >= 0)[:, None] & (cols >= 0)[None, :], mapped, -1).astype(np.int32)


def superpixel_clusters(
    superpixels: Any, height: int | None = None, width: int | None = None
) -> list[list[tuple[int, int]]]:
    """SynapseML's ``clusters``: for each superpixel in label order, the ``(x, y)`` pixels of the
    photo that belong to it (row by row), so ``row["superpixels"]["clusters"]`` of SynapseML is
    ``superpixel_clusters(row["superpixels"])`` here. Pixels the model did not see are in none;
    a superpixel the photo does not show (a letterbox's padding) has an empty list.

    The photo is of the source's size, or ``height x width`` (see :func:`photo_labels`). The
    lists are made here, on demand, not kept in the DataFrame: a 12 MP photo's would be some
    hundreds of MB a row in Spark's layout.

    Examples
    --------
    >>> clusters = superpixel_clusters({"height": 1, "width": 2, "labels": [0, 1]})
    >>> clusters
    [[(0, 0)], [(1, 0)]]
    """
    labels = photo_labels(superpixels, height, width)
    count = int(superpixel_labels(superpixels).max()) + 1
    flat = labels.reshape(-1)
    order = np.argsort(flat, kind="stable")
    order = order[flat[order] >= 0]
    ys, xs = np.divmod(order, labels.shape[1])
    bounds = np.cumsum(np.bincount(flat[order], minlength=count))[:-1]
    return [
        list(zip(x.tolist(), y.tolist(), strict=True))
        for x, y in zip(np.split(xs, bounds), np.split(ys, bounds), strict=True)
    ]


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
        on the image the model sees (often smaller, cropped or letterboxed): each photo pixel
        takes the superpixel of the model pixel it maps to (see :func:`photo_labels`), and
        pixels the model did not see stay as they are. The photo may be of any size with the
        source's aspect ratio. A label array is scaled to the photo (nearest neighbour).
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
    mapped = photo_labels(superpixels, height, width)
    seen = mapped >= 0
    labels = np.maximum(mapped, 0)
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    strength = np.abs(values) / scale if scale > 0 else np.zeros_like(values)
    opacity = np.where(seen, alpha * strength[labels], 0.0)[:, :, None]
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
