"""The image explainers' engine (ImageLIME, ImageSHAP): superpixels by SLIC-style clustering, the
samples' masks over them, the perturbed images, and the local fits. The same arithmetic as the
JVM's ``mmlspark.explainers.Superpixels``, step for step, so that both backends give the same
superpixels and the same LIME masks for the same image (every sum is of integers, exact in
float64, and ties go to the lower cluster on both).

SLIC (Achanta et al., 2012) on the image's own channels (0 to 255 each, not Lab): cluster
centres start on a grid of about ``cellSize`` pixels; each of ten rounds gives every pixel within
``cellSize`` of a centre (in y and in x) to the centre of least ``dc^2 + ds^2 (modifier /
cellSize)^2`` (dc the colour distance, ds the distance in pixels), then moves each centre to the
mean of its pixels. Superpixels are numbered in the order their first pixel appears, row by row.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

from mmlspark._engine import explain
from mmlspark._engine.headers import exif_orientation, is_jpeg, read_header
from mmlspark._engine.rows import Task, list_array
from mmlspark._engine.structs import from_struct, image_array, to_struct

__all__ = [
    "FIT_SCHEMA",
    "ITERATIONS",
    "SUPERPIXEL_TYPE",
    "ImagePlan",
    "image_fit_partition",
    "lime_fit",
    "lime_masks",
    "perturb",
    "perturb_partition",
    "segment_partition",
    "shap_masks",
    "slic",
    "source_size",
    "view",
]

#: The rounds of assignment and update.
ITERATIONS = 10

_MASK64 = (1 << 64) - 1


def slic(pixels: np.ndarray, cell_size: float, modifier: float) -> np.ndarray:
    """Each pixel's superpixel (``int32``, ``height x width``), numbered 0.. in the order of their
    first pixels, row by row."""
    h, w = pixels.shape[0], pixels.shape[1]
    image = pixels.reshape(h, w, -1).astype(np.float64)
    channels = image.shape[2]
    ny = max(1, math.floor(h / cell_size + 0.5))
    nx = max(1, math.floor(w / cell_size + 0.5))
    count = ny * nx
    cy = np.array([(i + 0.5) * h / ny for i in range(ny) for _ in range(nx)])
    cx = np.array([(j + 0.5) * w / nx for _ in range(ny) for j in range(nx)])
    colours = np.array(
        [image[math.floor(cy[k]), math.floor(cx[k])] for k in range(count)], dtype=np.float64
    ).reshape(count, channels)
    ys = np.arange(h, dtype=np.int64)
    xs = np.arange(w, dtype=np.int64)
    labels = ((ys * ny // h)[:, None] * nx + (xs * nx // w)[None, :]).astype(np.int64)
    ratio = (modifier / cell_size) * (modifier / cell_size)
    for _ in range(ITERATIONS):
        best = np.full((h, w), np.inf)
        for k in range(count):
            y0, y1 = (
                max(0, math.floor(cy[k] - cell_size)),
                min(h, math.floor(cy[k] + cell_size) + 1),
            )
            x0, x1 = (
                max(0, math.floor(cx[k] - cell_size)),
                min(w, math.floor(cx[k] + cell_size) + 1),
            )
            if y0 >= y1 or x0 >= x1:
                continue
            window = image[y0:y1, x0:x1]
            d = window[..., 0] - colours[k, 0]
            distance = d * d
            for c in range(1, channels):
                d = window[..., c] - colours[k, c]
                distance = distance + d * d
            dy = ys[y0:y1].astype(np.float64) - cy[k]
            dx = xs[x0:x1].astype(np.float64) - cx[k]
            distance = distance + ((dy * dy)[:, None] + (dx * dx)[None, :]) * ratio
            closer = distance < best[y0:y1, x0:x1]
            best[y0:y1, x0:x1][closer] = distance[closer]
            labels[y0:y1, x0:x1][closer] = k
        flat = labels.reshape(-1)
        sizes = np.bincount(flat, minlength=count)
        present = sizes > 0
        grid_y = np.broadcast_to(ys[:, None], (h, w)).reshape(-1)
        grid_x = np.broadcast_to(xs[None, :], (h, w)).reshape(-1)
        sums_y = np.bincount(flat, weights=grid_y, minlength=count)
        sums_x = np.bincount(flat, weights=grid_x, minlength=count)
        cy = np.where(present, sums_y / np.maximum(sizes, 1), cy)
        cx = np.where(present, sums_x / np.maximum(sizes, 1), cx)
        for c in range(channels):
            sums = np.bincount(flat, weights=image[..., c].reshape(-1), minlength=count)
            colours[:, c] = np.where(present, sums / np.maximum(sizes, 1), colours[:, c])
    _, first = np.unique(labels.reshape(-1), return_index=True)
    order = labels.reshape(-1)[np.sort(first)]
    renumber = np.zeros(count, dtype=np.int32)
    renumber[order] = np.arange(len(order), dtype=np.int32)
    return renumber[labels]


def _uniform(seed: int, samples: np.ndarray, features: int) -> np.ndarray:
    """A uniform draw in [0, 1) per (sample, feature): splitmix64's finalizer of seed + (sample <<
    32) + feature, its top 53 bits (the JVM's ``Superpixels.uniform``)."""
    with np.errstate(over="ignore"):
        s = np.asarray(samples, dtype=np.uint64)[:, None] << np.uint64(32)
        z = np.uint64(seed & _MASK64) + s + np.arange(features, dtype=np.uint64)[None, :]
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def lime_masks(features: int, samples: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """LIME's samples `samples` (indices) as 0/1 masks over the superpixels: sample 0 keeps them
    all (the image itself), each other keeps a superpixel where its draw is below `fraction`."""
    masks = (_uniform(seed, samples, features) < fraction).astype(np.float64)
    masks[np.asarray(samples) == 0] = 1.0
    return masks


# Kernel SHAP's coalitions per (count, samples, seed), kept per Python worker across tasks. This
# module travels by value (a functools cache would be pickled by reference, which a worker
# without mmlspark cannot load), so the cache lives in a namespace in the worker's sys.modules.
_MASKS = "_mmlspark_shap_masks"


def shap_masks(features: int, samples: int | None, seed: int) -> explain.Coalitions:
    """Kernel SHAP's coalitions over the superpixels (numSamples unset: the default count), made
    once per worker for each count of superpixels."""
    cache = sys.modules.get(_MASKS)
    if cache is None:
        fresh = types.ModuleType(_MASKS)
        fresh.masks = {}  # type: ignore[attr-defined]
        cache = sys.modules.setdefault(_MASKS, fresh)
    key = (features, samples, seed)
    found = cache.masks.get(key)
    if found is None:
        if len(cache.masks) >= 16:
            cache.masks.clear()
        count = samples if samples is not None else explain.default_samples(features)
        found = cache.masks[key] = explain.coalitions(features, count, seed)
    return found  # type: ignore[no-any-return]


def perturb(pixels: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The image with the superpixels whose mask is 0 black (every channel 0)."""
    keep = np.asarray(mask, dtype=np.float64)[labels] != 0.0
    shape = keep.shape + (1,) * (pixels.ndim - 2)
    return np.where(keep.reshape(shape), pixels, np.zeros((), dtype=pixels.dtype))


@dataclass(frozen=True)
class ImagePlan:
    """What an image explainer's tasks do: the columns, the superpixels' settings, and the
    samples (``kind`` "lime" or "shap"; ``samples`` None: SHAP's default count)."""

    kind: str
    image_col: str
    superpixel_col: str
    count_col: str
    samples_col: str
    sample_col: str
    target_col: str
    encode: bool
    cell_size: float
    modifier: float
    samples: int | None
    fraction: float
    seed: int
    width: float | None = None
    penalty: float = 0.0
    #: The explained image's column (inputCol), and the geometric operations that made the
    #: model-size image of it, as ``(name, integer arguments)`` (empty: the image itself).
    source_col: str | None = None
    view: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def sample_count(self, count: int) -> int:
        if self.kind == "lime":
            assert self.samples is not None
            return self.samples
        return len(shap_masks(count, self.samples, self.seed).masks)

    def mask(self, count: int, sample: int) -> np.ndarray:
        if self.kind == "lime":
            return lime_masks(count, np.array([sample]), self.fraction, self.seed)[0]
        return shap_masks(count, self.samples, self.seed).masks[sample]  # type: ignore[no-any-return]


SUPERPIXEL_TYPE = pa.struct(
    [
        pa.field("height", pa.int32(), nullable=False),
        pa.field("width", pa.int32(), nullable=False),
        pa.field("labels", pa.list_(pa.field("element", pa.int32(), nullable=False))),
        pa.field("sourceHeight", pa.int32()),
        pa.field("sourceWidth", pa.int32()),
        pa.field("transform", pa.list_(pa.field("element", pa.float64(), nullable=False))),
    ]
)


def view(ops: tuple[tuple[str, tuple[int, ...]], ...], height: int, width: int) -> list[float]:
    """Where the image that the geometric `ops` make of a `height` x `width` image lies in it:
    ``[ax, bx, ay, by]``, a point (x, y) of the source in pixel-edge coordinates (pixel i spans
    [i, i + 1)) going to (ax x + bx, ay y + by); the JVM's ``Superpixels.view``, step for step
    (each step ``a * s`` and ``b * s + t`` per axis), so both give the same doubles. OpenCV's
    resize maps pixel centres, ``(x + 0.5) s - 0.5``: in edge coordinates ``x s``."""
    h, w = height, width
    ax, bx, ay, by = 1.0, 0.0, 1.0, 0.0
    for name, args in ops:
        if name in ("resize", "resizeShorter"):
            if name == "resize":
                nh, nw = args
            else:
                size = args[0]
                scale = size / min(h, w)
                nh, nw = (
                    (size, math.floor(w * scale + 0.5))
                    if h <= w
                    else (
                        math.floor(h * scale + 0.5),
                        size,
                    )
                )
            sx, tx, sy, ty = nw / w, 0.0, nh / h, 0.0
            h, w = nh, nw
        elif name in ("crop", "centerCrop"):
            if name == "crop":
                x, y, ch, cw = args
            else:
                ch, cw = args
                x, y = (w - cw) // 2, (h - ch) // 2
            sx, tx, sy, ty = 1.0, -float(x), 1.0, -float(y)
            h, w = ch, cw
        elif name == "letterbox":
            size = args[0]
            scale = min(size / h, size / w)
            scaled_h, scaled_w = max(1, round(h * scale)), max(1, round(w * scale))
            top, left = (size - scaled_h) // 2, (size - scaled_w) // 2
            sx, tx, sy, ty = scaled_w / w, float(left), scaled_h / h, float(top)
            h, w = size, size
        elif name == "flip":
            # 0 flips up-down, a positive code left-right, a negative one both (OpenCV's flip)
            flip_x, flip_y = args[0] != 0, args[0] <= 0
            sx, tx = (-1.0, float(w)) if flip_x else (1.0, 0.0)
            sy, ty = (-1.0, float(h)) if flip_y else (1.0, 0.0)
        else:
            raise ValueError(f"{name} is not a geometric operation")
        ax, bx, ay, by = ax * sx, bx * sx + tx, ay * sy, by * sy + ty
    return [ax, bx, ay, by]


def source_size(value: Any) -> tuple[int, int] | None:
    """The (height, width) of the explained image: an image struct's, or encoded bytes' as they
    are decoded (a JPEG's EXIF orientation applied), from the header (None where it is not
    read)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return int(value["height"]), int(value["width"])
    header = read_header(value)
    if header is None:
        return None
    orientation = exif_orientation(value) if is_jpeg(value) else 1
    return (header.width, header.height) if orientation >= 5 else (header.height, header.width)


def segment_partition(plan: ImagePlan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """Adds each image's superpixels, their count and its samples' count (null for a null image,
    or one not of 8-bit samples)."""
    for batch in batches:
        labels: list[np.ndarray | None] = []
        for image in batch.column(plan.image_col).to_pylist():
            if image is None or image["mode"] & 7 != 0:
                labels.append(None)
            else:
                labels.append(slic(from_struct(image), plan.cell_size, plan.modifier))
        valid = pa.array(np.array([v is None for v in labels], dtype=bool))
        heights = pa.array([0 if v is None else v.shape[0] for v in labels], pa.int32())
        widths = pa.array([0 if v is None else v.shape[1] for v in labels], pa.int32())
        flat = list_array([None if v is None else v.reshape(-1) for v in labels], pa.int32())
        flat = flat.cast(SUPERPIXEL_TYPE.field("labels").type)
        counts = [None if v is None else int(v.max()) + 1 for v in labels]
        sources: list[tuple[int, int] | None] = [
            None if v is None else (v.shape[0], v.shape[1]) for v in labels
        ]
        if plan.view:
            photo = batch.column(plan.source_col)
            if pa.types.is_struct(photo.type):  # the size only: not the pixels into Python
                photos: list[Any] = [
                    None if h is None else {"height": h, "width": w}
                    for h, w in zip(
                        photo.field("height").to_pylist(),
                        photo.field("width").to_pylist(),
                        strict=True,
                    )
                ]
            else:
                photos = photo.to_pylist()
            sources = [
                None if v is None else source_size(p) for v, p in zip(labels, photos, strict=True)
            ]
        views = [None if s is None else view(plan.view, *s) for s in sources]
        superpixels = pa.StructArray.from_arrays(
            [
                heights,
                widths,
                flat,
                pa.array([None if s is None else s[0] for s in sources], pa.int32()),
                pa.array([None if s is None else s[1] for s in sources], pa.int32()),
                pa.array(views, SUPERPIXEL_TYPE.field("transform").type),
            ],
            fields=list(SUPERPIXEL_TYPE),
            mask=valid,
        )
        yield pa.RecordBatch.from_arrays(
            [
                *batch.columns,
                superpixels,
                pa.array(counts, pa.int32()),
                pa.array([None if c is None else plan.sample_count(c) for c in counts], pa.int32()),
            ],
            names=[*batch.schema.names, plan.superpixel_col, plan.count_col, plan.samples_col],
        )


def perturb_partition(plan: ImagePlan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """Replaces the target column of each sample (moved last) by the image with the superpixels
    its mask leaves out black: an image struct, or PNG bytes where ``encode``. The model-size
    image (``image_col``) is dropped where it is not the target."""
    import cv2

    for batch in batches:
        images = batch.column(plan.image_col).to_pylist()
        superpixels = batch.column(plan.superpixel_col).to_pylist()
        counts = batch.column(plan.count_col).to_pylist()
        samples = batch.column(plan.sample_col).to_pylist()
        out: list[Any] = []
        for image, sp, count, sample in zip(images, superpixels, counts, samples, strict=True):
            pixels = from_struct(image)
            labels = np.asarray(sp["labels"], dtype=np.int32).reshape(sp["height"], sp["width"])
            changed = perturb(pixels, labels, plan.mask(count, sample))
            if plan.encode:
                ok, png = cv2.imencode(".png", changed)
                out.append(png.tobytes() if ok else None)
            else:
                out.append(to_struct(changed, image["origin"]))
        # the model-size image goes too where the sample is written elsewhere: the batches must
        # hold exactly the columns the step declares, as a later step fused to it reads them
        gone = {plan.target_col, plan.image_col}
        names = [n for n in batch.schema.names if n not in gone]
        column = pa.array(out, pa.binary()) if plan.encode else image_array(out)
        yield pa.RecordBatch.from_arrays(
            [*[batch.column(n) for n in names], column], names=[*names, plan.target_col]
        )


FIT_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int32()),
        ("coefficients", pa.list_(pa.float64())),
        ("r2", pa.float64()),
        ("superpixels", SUPERPIXEL_TYPE),
    ]
)


def lime_fit(plan: ImagePlan, masks: np.ndarray, ys: np.ndarray) -> tuple[list[float], float]:
    """LIME's fit over the superpixels: each sample weighted by sqrt(exp(-d^2 / width^2)), d^2 the
    number of superpixels it leaves out (width unset: 0.75 * sqrt(superpixels))."""
    count = masks.shape[1]
    width = plan.width if plan.width is not None else 0.75 * math.sqrt(count)
    d2 = ((1.0 - masks) ** 2).sum(axis=1)
    w = np.sqrt(np.exp(-d2 / (width * width)))
    return explain.ridge(masks, ys, w, plan.penalty)


def image_fit_partition(plan: ImagePlan, batches: Iterator[Any]) -> Iterator[Any]:
    """Rows of (id, k, superpixels, count, samples, ys): each (image, class)'s masks drawn again
    from its superpixel count, and solved."""
    for batch in batches:
        out = []
        for count, samples, ys in zip(
            batch.column("count").to_pylist(),
            batch.column("samples").to_pylist(),
            batch.column("ys").to_pylist(),
            strict=True,
        ):
            values = np.zeros(plan.sample_count(count))
            values[np.array(samples, dtype=np.int64)] = ys
            if plan.kind == "lime":
                masks = lime_masks(count, np.arange(len(values)), plan.fraction, plan.seed)
                out.append(lime_fit(plan, masks, values))
            else:
                out.append(explain.shap_fit(shap_masks(count, plan.samples, plan.seed), values))
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("id"),
                batch.column("k"),
                pa.array([r[0] for r in out], pa.list_(pa.float64())),
                pa.array([r[1] for r in out], pa.float64()),
                batch.column("superpixels"),
            ],
            schema=FIT_SCHEMA,
        )
