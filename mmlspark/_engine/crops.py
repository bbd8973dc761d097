"""CropDetections in the Python workers (``scala/.../detection/CropDetections.scala``):
``CropChoice``'s choice of detections, integer rounding, square widening and black padding, one
output row per crop as ``explode`` (or ``explode_outer``) gives them. Error texts are the JVM's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.decode import decode
from mmlspark._engine.files import max_pixels
from mmlspark._engine.java import java_double, java_int
from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import OUT_BYTES, OUT_ROWS, ROWS_PER_SLICE, RowError, Task, describe
from mmlspark._engine.structs import from_struct, image_array, to_struct


@dataclass(frozen=True)
class CropRegion:
    """Where a crop lies in its image (``CropChoice.crop``'s arithmetic): the pixels
    [x, x + width) x [y, y + height) of the image, placed at (left, top) of a crop of
    `crop_width` x `crop_height` (a square crop is padded with black where the image ends)."""

    x: int
    y: int
    width: int
    height: int
    left: int
    top: int
    crop_width: int
    crop_height: int


def crop_region(
    image_h: int, image_w: int, bbox: Sequence[float | None] | None, square: bool
) -> CropRegion:
    """The region of an `image_h` x `image_w` image that `bbox` ([x_min, y_min, width, height]
    as fractions) crops; a RowError, with the JVM's text, for a box that crops nothing."""
    if bbox is None or len(bbox) != 4:
        shown = "None" if bbox is None else f"Some({len(bbox)})"
        raise RowError(row_message("boxSize", count=shown))
    if any(v is None for v in bbox):
        raise RowError(row_message("boxNull", box=", ".join(java_double(v) for v in bbox)))
    b = [float(v) for v in bbox]  # type: ignore[arg-type]
    x = min(max(java_int(b[0] * image_w), 0), image_w - 1)
    y = min(max(java_int(b[1] * image_h), 0), image_h - 1)
    w = min(java_int(b[2] * image_w), image_w - x)
    h = min(java_int(b[3] * image_h), image_h - y)
    if w <= 0 or h <= 0:
        shown = ", ".join(java_double(v) for v in bbox)
        raise RowError(row_message("boxEmpty", box=shown, width=image_w, height=image_h))
    if not square:
        return CropRegion(x, y, w, h, 0, 0, w, h)
    side = max(w, h)
    x = max(0, min(x - (side - w) // 2, image_w - min(side, image_w)))
    y = max(0, min(y - (side - h) // 2, image_h - min(side, image_h)))
    w = min(side, image_w)
    h = min(side, image_h)
    return CropRegion(x, y, w, h, (side - w) // 2, (side - h) // 2, side, side)


def crop(image: np.ndarray, bbox: Sequence[float | None] | None, square: bool) -> np.ndarray:
    """The crop of `image` at `bbox` ([x_min, y_min, width, height] as fractions), a new array
    (``CropChoice.crop``)."""
    import cv2

    r = crop_region(image.shape[0], image.shape[1], bbox, square)
    region = np.array(image[r.y : r.y + r.height, r.x : r.x + r.width], order="C")
    if (r.width, r.height) == (r.crop_width, r.crop_height):
        return region
    return cv2.copyMakeBorder(  # type: ignore[no-any-return]
        region,
        r.top,
        r.crop_height - r.height - r.top,
        r.left,
        r.crop_width - r.width - r.left,
        cv2.BORDER_CONSTANT,
        value=(0, 0, 0, 0),
    )


def chosen(
    found: list[dict[str, Any] | None] | None, threshold: float, categories: frozenset[str]
) -> list[int]:
    """The indices of the detections that are cropped (``CropChoice.chosen``): conf at least the
    threshold, category among `categories` when there are any. A null detection or conf is not
    chosen."""
    if found is None:
        return []
    picked = []
    for i, d in enumerate(found):
        if d is None or d.get("conf") is None or not d["conf"] >= threshold:
            continue
        if not categories or d.get("category") in categories:
            picked.append(i)
    return picked


@dataclass(frozen=True)
class CropPlan:
    """What CropDetections' tasks run."""

    input_col: str
    detections_col: str
    binary: bool
    kept: tuple[int, ...]  # the positions of the input columns passed on
    threshold: float
    categories: frozenset[str]
    square: bool
    keep_uncropped: bool
    setting: str | None
    index_col: str
    detection_col: str
    output_col: str
    error_col: str


def _crops_of(
    plan: CropPlan, value: Any, found: list[Any] | None, limit: int
) -> list[tuple[int | None, tuple[Any, ...] | None, str | None]]:
    """One input row's output rows: (detection index, crop struct, error) per chosen detection
    (``CropChoice.crops``); with `keep_uncropped`, one row of nulls when none is chosen."""
    wanted = chosen(found, plan.threshold, plan.categories)
    if not wanted:
        return [(None, None, None)] if plan.keep_uncropped else []
    assert found is not None
    try:
        if plan.binary:
            if value is None:
                raise RowError(row_message("noImage"))
            image = decode(value, "color", True, 1, 0, 0, limit)
            origin = None
        else:
            image = from_struct(value)
            origin = value["origin"]
    except Exception as error:  # noqa: BLE001 (the image's failure is each crop's reason)
        why = describe(error)
        return [(i, None, why) for i in wanted]
    results: list[tuple[int | None, tuple[Any, ...] | None, str | None]] = []
    for i in wanted:
        detection = found[i]
        try:
            pixels = crop(image, None if detection is None else detection.get("bbox"), plan.square)
            results.append((i, to_struct(pixels, origin), None))
        except Exception as error:  # noqa: BLE001 (a failing crop keeps its reason)
            results.append((i, None, describe(error)))
    return results


def _crop_batch(
    plan: CropPlan,
    batch: Any,
    rows: list[int],
    results: list[tuple[int | None, tuple[Any, ...] | None, str | None]],
) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    taken = pa.array(rows, pa.int64())
    arrays = [batch.column(i).take(taken) for i in plan.kept]
    names = [batch.schema.names[i] for i in plan.kept]
    found = batch.column(plan.detections_col)
    offsets = found.offsets.to_numpy()
    flat = [
        None if i is None else int(offsets[r]) + i
        for r, (i, _, _) in zip(rows, results, strict=True)
    ]
    arrays += [
        pa.array([i for i, _, _ in results], pa.int32()),
        found.values.take(pa.array(flat, pa.int64())),
        image_array([c for _, c, _ in results]),
        pa.array([e for _, _, e in results], pa.string()),
    ]
    names += [plan.index_col, plan.detection_col, plan.output_col, plan.error_col]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def partition(plan: CropPlan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """CropDetections' rows: one per crop, the input's other columns repeated, in batches bounded
    in rows and bytes."""
    limit = max_pixels(plan.setting)
    for batch in batches:
        rows: list[int] = []
        results: list[tuple[int | None, tuple[Any, ...] | None, str | None]] = []
        size = 0
        for offset in range(0, batch.num_rows, ROWS_PER_SLICE):
            part = batch.slice(offset, ROWS_PER_SLICE)
            values = part.column(plan.input_col).to_pylist()
            founds = part.column(plan.detections_col).to_pylist()
            for r, (value, found) in enumerate(zip(values, founds, strict=True)):
                for result in _crops_of(plan, value, found, limit):
                    rows.append(offset + r)
                    results.append(result)
                    size += 0 if result[1] is None else len(result[1][5])
                if size >= OUT_BYTES or len(rows) >= OUT_ROWS:
                    yield _crop_batch(plan, batch, rows, results)
                    rows, results, size = [], [], 0
        if rows or batch.num_rows == 0:
            yield _crop_batch(plan, batch, rows, results)
