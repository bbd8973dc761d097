"""ObjectDetector and CropDetections on the Python backend: OpenCV and onnxruntime in an Arrow UDF
(``mapInArrow``), no jar.

The row semantics are the JVM stages' (``scala/.../detection``). ObjectDetector: the image decoded
as ``ImageTransformer`` decodes it (EXIF orientation, the smallest JPEG scale covering the square
with ``reducedDecode``), the ``letterbox`` operation of ``_cv`` (bilinear, padded evenly with 114),
an RGB CHW tensor of values / 255, the model run as the JVM's inner ``ONNXModel`` runs it (``_ort``:
one session per worker, mini-batches), then ``YoloDecoder``: candidates over the threshold in
float32 as the JVM computes them, greedy per-class suppression in order of confidence (ties by box
index) with the same IoU rule, at most ``maxDetections`` kept, boxes mapped back through the
letterbox to fractions of the image. CropDetections: ``CropChoice``'s choice of detections, integer
rounding, square widening and black padding, one output row per crop as ``explode`` (or
``explode_outer``) gives them. Error texts are the JVM's.

The tasks' code imports nothing from mmlspark: this module travels to the Python workers by value
with its twins (``_cv``, ``_headers``, ``_ort``), whose functions it names directly.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from mmlspark.onnx._ort import Plan as OrtPlan
from mmlspark.onnx._ort import _partition as _score
from mmlspark.opencv._cv import (
    Image,
    Op,
    RowError,
    _describe,
    apply,
    decode,
    from_struct,
    max_pixels,
    order_of,
    to_chw,
    to_struct,
)

V5, V8 = "yolov5", "yolov8"
FORMATS = ("auto", V5, V8)
DEVICE_TYPES = {"auto": "auto", "cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}
DEFAULT_IMAGE_SIZE = 640
PAD_VALUE = 114.0
# At most this many candidates go into the suppression, the most confident first (YoloDecoder).
MAX_CANDIDATES = 30000
INPUT_DESCRIPTION = (
    "an image struct (origin, height, width, nChannels, mode, data) or encoded image bytes (binary)"
)
DETECTIONS_DESCRIPTION = (
    "an array of detections (category, label, conf, bbox), as ObjectDetector writes them"
)
_ROWS_PER_SLICE = 16
_OUT_ROWS, _OUT_BYTES = 64, 64 << 20


# ---------------------------------------------------------------------------------------------
# Java's arithmetic where Python's differs


def java_int(value: float) -> int:
    """Java's ``(int)`` of a double: toward zero, NaN to 0, saturated at the int range."""
    if value != value:
        return 0
    if value >= 2147483647.0:
        return 2147483647
    if value <= -2147483648.0:
        return -2147483648
    return int(value)


def _java_max(a: float, b: float) -> float:
    if a != a or b != b:
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def _java_min(a: float, b: float) -> float:
    if a != a or b != b:
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def java_double(value: float | None) -> str:
    """Java's ``Double.toString`` (its shortest digits): ``0.25``, ``1.0``, ``1.0E-4``, ``NaN``;
    ``null`` for a missing value, as Scala's ``mkString`` shows one."""
    if value is None:
        return "null"
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    _, all_digits, exponent = Decimal(repr(abs(value))).as_tuple()
    written = "".join(map(str, all_digits))
    digits = written.rstrip("0")
    # The value is 0.<digits> x 10^point.
    point = len(written) + int(exponent)
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


# ---------------------------------------------------------------------------------------------
# The detector's output (YoloOutput.scala)


@dataclass(frozen=True)
class Layout:
    """The layout of a YOLO detector's output per image: "yolov5" is [K, 5 + C] (cx, cy, w, h,
    objectness, C class scores per box), "yolov8" is [4 + C, K]."""

    format: str
    classes: int

    @property
    def attributes(self) -> int:
        """Values per box."""
        return (5 if self.format == V5 else 4) + self.classes


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def resolve_layout(row_shape: Sequence[int], model_format: str) -> Layout:
    """The layout of an output whose per-image shape is `row_shape` (-1: dynamic) in
    `model_format` (``YoloLayout.resolve``); a ValueError with the JVM's words when it fits
    neither, or "auto" cannot tell."""

    def fail(why: str) -> ValueError:
        return ValueError(
            "a YOLO detector's output is [N, K, 5+C] (yolov5: boxes, then cx, cy, w, h, "
            "objectness and C class scores) or [N, 4+C, K] (yolov8), but the model's is per image "
            f"{_shape_text(row_shape)}: {why}"
        )

    if len(row_shape) != 2:
        raise fail("it does not have two dimensions after the batch")
    a, b = int(row_shape[0]), int(row_shape[1])
    chosen = str(model_format).strip().lower()
    if chosen not in FORMATS:
        raise ValueError(f"'{model_format}' is not one of 'auto', 'yolov5', 'yolov8'")

    def v5() -> Layout:
        if b >= 6:
            return Layout(V5, b - 5)
        raise fail("as yolov5 its last dimension must be fixed and at least 6")

    def v8() -> Layout:
        if a >= 5:
            return Layout(V8, a - 4)
        raise fail("as yolov8 its first dimension must be fixed and at least 5")

    if chosen == V5:
        return v5()
    if chosen == V8:
        return v8()
    # The attributes' dimension is fixed (and big enough); of two such, the smaller one.
    if b >= 6 and (a < 5 or b < a):
        return v5()
    if a >= 5 and (b < 6 or a < b):
        return v8()
    raise fail("modelFormat 'auto' cannot tell the layout; set modelFormat to yolov5 or yolov8")


@dataclass(frozen=True)
class Geometry:
    """How the letterbox fits a `height` x `width` image into a `size` square
    (``LetterboxGeometry``)."""

    height: int
    width: int
    size: int
    scaled_height: int
    scaled_width: int
    top: int
    left: int

    @staticmethod
    def of(height: int, width: int, size: int) -> Geometry:
        if height <= 0 or width <= 0:
            raise RowError(f"requirement failed: letterbox: an empty {width}x{height} image")
        scale = min(size / height, size / width)
        # round() rounds half to even, as Java's Math.rint.
        scaled_height = max(1, round(height * scale))
        scaled_width = max(1, round(width * scale))
        return Geometry(
            height,
            width,
            size,
            scaled_height,
            scaled_width,
            (size - scaled_height) // 2,
            (size - scaled_width) // 2,
        )

    def to_image_x(self, x: float) -> float:
        """A column of the square in the image's pixels, clipped to the image."""
        return _java_min(
            _java_max((x - self.left) * self.width / self.scaled_width, 0.0), float(self.width)
        )

    def to_image_y(self, y: float) -> float:
        return _java_min(
            _java_max((y - self.top) * self.height / self.scaled_height, 0.0), float(self.height)
        )


@dataclass(frozen=True)
class Decoder:
    """``YoloDecoder``'s settings."""

    layout: Layout
    confidence_threshold: float
    iou_threshold: float
    max_detections: int
    class_names: tuple[str, ...]


def _suppressed(
    kept: int, rest: np.ndarray, corners: np.ndarray, classes: np.ndarray, iou_threshold: float
) -> np.ndarray:
    """Which boxes of `rest` (indices after `kept`) the kept box suppresses: those of its class
    whose intersection over union with it (``YoloDecoder.iou``, in doubles) is over the
    threshold."""
    a = corners[kept]
    b = corners[rest]
    iw = np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0])
    ih = np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1])
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    with np.errstate(all="ignore"):
        ratio = inter / union
    iou = np.where((iw <= 0) | (ih <= 0) | (union <= 0), 0.0, ratio)
    return (classes[rest] == classes[kept]) & (iou > iou_threshold)  # type: ignore[no-any-return]


def detections(
    raw: np.ndarray | None, decoder: Decoder, geometry: Geometry
) -> list[dict[str, Any]]:
    """The detections of one image's raw output (float32, flat), as ``YoloDecoder.apply`` gives
    them: each a dict of category, label, conf and bbox."""
    if raw is None:
        raise RowError("no detector output (null)")
    layout = decoder.layout
    per = layout.attributes
    if raw.size % per != 0:
        raise RowError(
            f"the detector output has {raw.size} values, not a multiple of {per} "
            f"({layout.format} with {layout.classes} classes)"
        )
    boxes = raw.size // per
    values = np.asarray(raw, dtype=np.float32).reshape(-1)
    v5 = layout.format == V5
    table = values.reshape(boxes, per) if v5 else values.reshape(per, boxes).T
    threshold = np.float32(decoder.confidence_threshold)
    if v5:
        objectness = table[:, 4]
        scores = table[:, 5:] * objectness[:, None]  # float32 products, as the JVM's
        eligible = objectness > threshold
    else:
        scores = table[:, 4:]
        eligible = np.ones(boxes, dtype=bool)
    # The first class with the largest score (NaN never wins, as in the JVM's strict '>').
    finite = np.where(np.isnan(scores), np.float32(-np.inf), scores)
    best = np.argmax(finite, axis=1) if boxes else np.zeros(0, dtype=np.int64)
    conf = finite[np.arange(boxes), best]
    candidates = np.flatnonzero(eligible & (conf > threshold))
    # Most confident first, ties by box index; then the first MAX_CANDIDATES.
    order = candidates[np.lexsort((candidates, -conf[candidates]))][:MAX_CANDIDATES]
    chosen = table[order]
    cx, cy = chosen[:, 0].astype(np.float64), chosen[:, 1].astype(np.float64)
    # w / 2 and h / 2 are float divisions before the double arithmetic, as the JVM's.
    half_w = (chosen[:, 2] / np.float32(2)).astype(np.float64)
    half_h = (chosen[:, 3] / np.float32(2)).astype(np.float64)
    corners = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=1)
    classes = best[order]
    alive = np.ones(len(order), dtype=bool)
    kept: list[int] = []
    for i in range(len(order)):
        if len(kept) >= decoder.max_detections:
            break
        if not alive[i]:
            continue
        kept.append(i)
        rest = np.arange(i + 1, len(order))
        if rest.size:
            alive[i + 1 :] &= ~_suppressed(i, rest, corners, classes, decoder.iou_threshold)
    found = []
    for i in kept:
        c = [float(v) for v in corners[i]]
        x1, y1 = geometry.to_image_x(c[0]), geometry.to_image_y(c[1])
        x2, y2 = geometry.to_image_x(c[2]), geometry.to_image_y(c[3])
        cls = int(classes[i])
        found.append(
            {
                "category": str(cls + 1),
                "label": decoder.class_names[cls],
                "conf": float(conf[order[i]]),
                "bbox": [
                    x1 / geometry.width,
                    y1 / geometry.height,
                    (x2 - x1) / geometry.width,
                    (y2 - y1) / geometry.height,
                ],
            }
        )
    return found


# ---------------------------------------------------------------------------------------------
# The crops (CropDetections.scala)


def crop(image: np.ndarray, bbox: Sequence[float | None] | None, square: bool) -> np.ndarray:
    """The crop of `image` at `bbox` ([x_min, y_min, width, height] as fractions), a new array
    (``CropChoice.crop``)."""
    import cv2

    if bbox is None or len(bbox) != 4:
        shown = "None" if bbox is None else f"Some({len(bbox)})"
        raise RowError(f"a bbox has 4 values, not {shown}")
    if any(v is None for v in bbox):
        raise RowError(f"the box [{', '.join(java_double(v) for v in bbox)}] has a null value")
    b = [float(v) for v in bbox]  # type: ignore[arg-type]
    image_h, image_w = image.shape[:2]
    x = min(max(java_int(b[0] * image_w), 0), image_w - 1)
    y = min(max(java_int(b[1] * image_h), 0), image_h - 1)
    w = min(java_int(b[2] * image_w), image_w - x)
    h = min(java_int(b[3] * image_h), image_h - y)
    if w <= 0 or h <= 0:
        shown = ", ".join(java_double(v) for v in bbox)
        raise RowError(f"the box [{shown}] is empty in a {image_w}x{image_h} image")
    side = max(w, h)
    if square:
        x = max(0, min(x - (side - w) // 2, image_w - min(side, image_w)))
        y = max(0, min(y - (side - h) // 2, image_h - min(side, image_h)))
        w = min(side, image_w)
        h = min(side, image_h)
    region = np.array(image[y : y + h, x : x + w], order="C")
    if not square or (w == side and h == side):
        return region
    top, left = (side - h) // 2, (side - w) // 2
    return cv2.copyMakeBorder(  # type: ignore[no-any-return]
        region,
        top,
        side - h - top,
        left,
        side - w - left,
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


# ---------------------------------------------------------------------------------------------
# The Arrow side


@dataclass(frozen=True)
class DetectPlan:
    """What ObjectDetector's tasks run: letterbox (`size`) -> the ONNX plan -> decode."""

    input_col: str
    binary: bool
    reduced: bool
    size: int
    setting: str | None  # spark.mmlspark.image.maxPixels
    columns: int  # the input columns, passed on first
    tensor_col: str
    height_col: str
    width_col: str
    image_error_col: str
    raw_col: str
    model_error_col: str
    onnx: OrtPlan
    decoder: Decoder
    output_col: str
    error_col: str
    min_rows: int  # rows per prepared batch at least (a full mini-batch), but at a batch's end


def _letterboxed(plan: DetectPlan, value: Any, limit: int) -> tuple[np.ndarray, int, int]:
    """The image's RGB CHW tensor of values / 255 letterboxed to the plan's square, with the
    decoded image's height and width (``ObjectDetector.toTensor``)."""
    if plan.binary:
        if value is None:
            raise RowError("no input image (null)")
        target = plan.size if plan.reduced else 0
        pixels = decode(value, "color", True, 1, target, target, limit)
    else:
        pixels = from_struct(value)
    height, width = pixels.shape[:2]
    Geometry.of(height, width, plan.size)  # an empty image fails with the JVM's words
    box = Op("letterbox", {"size": plan.size, "padValue": PAD_VALUE})
    chw = to_chw(apply(box, Image(pixels, order_of(pixels))), "RGB")
    return np.divide(chw, np.float32(255), dtype=np.float32), int(height), int(width)


def _list_array(values: list[np.ndarray | None], element: Any) -> Any:
    """One Arrow list array from flat numpy arrays (None: a null row)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    lengths = [0 if v is None else v.size for v in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [v for v in values if v is not None]
    flat = np.concatenate(present) if present else np.zeros(0, dtype=np.float32)
    mask = pa.array(np.array([v is None for v in values], dtype=bool))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=element), mask=mask)


def _prepared(plan: DetectPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The rows with their tensor, image size and image error, in batches of a few full
    mini-batches (bounded in bytes), so the model runs full batches while memory stays bounded."""
    import pyarrow as pa

    limit = max_pixels(plan.setting)
    names = [plan.tensor_col, plan.height_col, plan.width_col, plan.image_error_col]

    def out(rows: Any, tensors: list[Any], hs: list[Any], ws: list[Any], errors: list[Any]) -> Any:
        arrays = [
            *rows.columns,
            _list_array(tensors, pa.float32()),
            pa.array(hs, pa.int32()),
            pa.array(ws, pa.int32()),
            pa.array(errors, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, names=[*rows.schema.names, *names])

    for batch in batches:
        total = batch.num_rows
        if total == 0:
            yield out(batch, [], [], [], [])
            continue
        tensors: list[np.ndarray | None] = []
        hs: list[int | None] = []
        ws: list[int | None] = []
        errors: list[str | None] = []
        size, first = 0, 0
        for offset in range(0, total, _ROWS_PER_SLICE):
            part = batch.slice(offset, _ROWS_PER_SLICE)
            for value in part.column(plan.input_col).to_pylist():
                try:
                    tensor, height, width = _letterboxed(plan, value, limit)
                    tensors.append(tensor)
                    hs.append(height)
                    ws.append(width)
                    errors.append(None)
                    size += tensor.nbytes
                except Exception as error:  # noqa: BLE001 (a failing row keeps its reason)
                    tensors.append(None)
                    hs.append(None)
                    ws.append(None)
                    errors.append(_describe(error))
            end = offset + part.num_rows
            full = len(tensors) >= plan.min_rows and (size >= _OUT_BYTES or len(tensors) >= 64)
            if full or end == total:
                yield out(batch.slice(first, end - first), tensors, hs, ws, errors)
                tensors, hs, ws, errors, size, first = [], [], [], [], 0, end


def _floats(column: Any) -> list[np.ndarray | None]:
    """A list<float> column's rows as numpy views of its buffer (None: null)."""
    values = column.values.to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [values[offsets[r] : offsets[r + 1]] if valid[r] else None for r in range(len(column))]


def detections_arrow_type() -> Any:
    import pyarrow as pa

    return pa.list_(
        pa.struct(
            [
                ("category", pa.string()),
                ("label", pa.string()),
                ("conf", pa.float64()),
                ("bbox", pa.list_(pa.float64())),
            ]
        )
    )


def _decoded(plan: DetectPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The input columns with the detections and the first error of the image, the model and the
    decoding (the JVM's coalesce)."""
    import pyarrow as pa

    kind = detections_arrow_type()
    for batch in batches:
        raws = _floats(batch.column(plan.raw_col))
        hs = batch.column(plan.height_col).to_pylist()
        ws = batch.column(plan.width_col).to_pylist()
        image_errors = batch.column(plan.image_error_col).to_pylist()
        model_errors = batch.column(plan.model_error_col).to_pylist()
        found: list[Any] = []
        errors: list[str | None] = []
        for raw, h, w, image_error, model_error in zip(
            raws, hs, ws, image_errors, model_errors, strict=True
        ):
            error = image_error if image_error is not None else model_error
            value = None
            if error is None:
                try:
                    value = detections(raw, plan.decoder, Geometry.of(h, w, plan.size))
                except Exception as failure:  # noqa: BLE001 (a failing row keeps its reason)
                    error = _describe(failure)
            found.append(value)
            errors.append(error)
        arrays = [batch.column(i) for i in range(plan.columns)]
        arrays += [pa.array(found, type=kind), pa.array(errors, pa.string())]
        names = [*batch.schema.names[: plan.columns], plan.output_col, plan.error_col]
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def _detect(plan: DetectPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """ObjectDetector's rows: letterboxed, scored by onnxruntime, decoded, in one pass."""
    return _decoded(plan, _score(plan.onnx, _prepared(plan, batches)))


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


_IMAGE_FIELDS = ("origin", "height", "width", "nChannels", "mode", "data")


def _image_array(values: list[tuple[Any, ...] | None]) -> Any:
    import pyarrow as pa

    rows = [(None, 0, 0, 0, 0, None) if v is None else v for v in values]
    types = [pa.string(), pa.int32(), pa.int32(), pa.int32(), pa.int32(), pa.binary()]
    arrays = [pa.array([row[i] for row in rows], type=t) for i, t in enumerate(types)]
    mask = pa.array(np.array([v is None for v in values], dtype=bool))
    return pa.StructArray.from_arrays(arrays, names=list(_IMAGE_FIELDS), mask=mask)


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
                raise RowError("no input image (null)")
            image = decode(value, "color", True, 1, 0, 0, limit)
            origin = None
        else:
            image = from_struct(value)
            origin = value["origin"]
    except Exception as error:  # noqa: BLE001 (the image's failure is each crop's reason)
        why = _describe(error)
        return [(i, None, why) for i in wanted]
    results: list[tuple[int | None, tuple[Any, ...] | None, str | None]] = []
    for i in wanted:
        detection = found[i]
        try:
            pixels = crop(image, None if detection is None else detection.get("bbox"), plan.square)
            results.append((i, to_struct(pixels, origin), None))
        except Exception as error:  # noqa: BLE001 (a failing crop keeps its reason)
            results.append((i, None, _describe(error)))
    return results


def _crop_batch(
    plan: CropPlan,
    batch: Any,
    rows: list[int],
    results: list[tuple[int | None, tuple[Any, ...] | None, str | None]],
) -> Any:
    import pyarrow as pa

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
        _image_array([c for _, c, _ in results]),
        pa.array([e for _, _, e in results], pa.string()),
    ]
    names += [plan.index_col, plan.detection_col, plan.output_col, plan.error_col]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _crops(plan: CropPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """CropDetections' rows: one per crop, the input's other columns repeated, in batches bounded
    in rows and bytes."""
    limit = max_pixels(plan.setting)
    for batch in batches:
        rows: list[int] = []
        results: list[tuple[int | None, tuple[Any, ...] | None, str | None]] = []
        size = 0
        for offset in range(0, batch.num_rows, _ROWS_PER_SLICE):
            part = batch.slice(offset, _ROWS_PER_SLICE)
            values = part.column(plan.input_col).to_pylist()
            founds = part.column(plan.detections_col).to_pylist()
            for r, (value, found) in enumerate(zip(values, founds, strict=True)):
                for result in _crops_of(plan, value, found, limit):
                    rows.append(offset + r)
                    results.append(result)
                    size += 0 if result[1] is None else len(result[1][5])
                if size >= _OUT_BYTES or len(rows) >= _OUT_ROWS:
                    yield _crop_batch(plan, batch, rows, results)
                    rows, results, size = [], [], 0
        if rows or batch.num_rows == 0:
            yield _crop_batch(plan, batch, rows, results)


# ---------------------------------------------------------------------------------------------
# The driver side


def detections_type() -> Any:
    """The detections column's type, as the JVM stage's (``Seq[Detection]``)."""
    from pyspark.sql import types as T

    return T.ArrayType(
        T.StructType(
            [
                T.StructField("category", T.StringType(), True),
                T.StructField("label", T.StringType(), True),
                T.StructField("conf", T.DoubleType(), False),
                T.StructField("bbox", T.ArrayType(T.DoubleType(), False), True),
            ]
        ),
        True,
    )


def _binary_or_image(data_type: Any) -> bool:
    from pyspark.sql import types as T

    from mmlspark.opencv._cv import is_image

    return isinstance(data_type, T.BinaryType) or is_image(data_type)


def is_detections(data_type: Any) -> bool:
    """Whether `data_type` is an array of structs with the fields of a detection
    (``CropDetections.isDetections``)."""
    from pyspark.sql import types as T

    if not (isinstance(data_type, T.ArrayType) and isinstance(data_type.elementType, T.StructType)):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    wanted: list[tuple[str, Any]] = [
        ("category", T.StringType()),
        ("conf", T.DoubleType()),
        ("bbox", None),  # an array of doubles
    ]
    for name, expected in wanted:
        if name not in fields:
            return False
        actual = fields[name]
        if isinstance(actual, T.ArrayType):
            if expected is not None or actual.elementType != T.DoubleType():
                return False
        elif expected is None or actual != expected:
            return False
    return True


def _pixel_setting(dataset: Any) -> str | None:
    from mmlspark.opencv._cv import MAX_PIXELS_KEY

    value = dataset.sparkSession.conf.get(MAX_PIXELS_KEY, None)
    if value is not None:
        max_pixels(value)  # a bad setting fails here, before any job
    return value  # type: ignore[no-any-return]


def detector_plan(
    fail: Callable[[str], Any],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    image_size: int | None,
    model_format: str,
    class_names: Sequence[str],
) -> tuple[int, Any, Any, Layout]:
    """The square size, the model input and output and the output's layout, checked as the JVM's
    ``ObjectDetector.plan`` checks them (`fail(message)` raises)."""
    if len(inputs) != 1:
        fail(f"a detector has one input (the image tensor) but the model has {len(inputs)}")
    spec = inputs[0]
    shape = spec.row_shape
    if len(shape) != 3 or (shape[0] >= 0 and shape[0] != 3):
        fail(f"the model input {spec.describe()} is not an image tensor [N, 3, H, W]")
    h, w = shape[1], shape[2]
    if h >= 0 and w >= 0 and h != w:
        fail(f"the model input {spec.describe()} is not square; a letterboxed image is")
    fixed = h if h >= 0 else w if w >= 0 else None
    if image_size is not None and fixed is not None and image_size != fixed:
        fail(
            f"imageSize is {image_size} but the model takes {fixed}x{fixed} images "
            f"(input {spec.describe()})"
        )
    size = image_size if image_size is not None else fixed or DEFAULT_IMAGE_SIZE
    if not outputs:
        fail("the model has no output")
    output = outputs[0]
    try:
        layout = resolve_layout(output.row_shape, model_format)
    except ValueError as error:
        fail(f"output {output.describe()}: {error}")
    if len(class_names) != layout.classes:
        fail(
            f"the detector gives {layout.classes} classes (output {output.describe()}, "
            f"{layout.format}) but classNames has {len(class_names)} "
            f"({', '.join(class_names)}); give one name per class"
        )
    return size, spec, output, layout


def transform_detector(stage: Any, dataset: Any) -> Any:
    """ObjectDetector's output on the Python backend."""
    from pyspark.sql import types as T

    from mmlspark.core.checks import fail, require_absent, require_column_type, require_distinct
    from mmlspark.core.fused import Step, run_step
    from mmlspark.image import _headers
    from mmlspark.onnx import ONNXModel, _ort
    from mmlspark.opencv import _cv

    schema = dataset.schema
    field = require_column_type(
        stage, schema, stage.getOrDefault("inputCol"), INPUT_DESCRIPTION, _binary_or_image
    )
    output_col, error_col = stage.getOrDefault("outputCol"), stage.getOrDefault("errorCol")
    require_absent(stage, schema, output_col)
    require_absent(stage, schema, error_col)
    require_distinct(stage, "outputCol and errorCol", [output_col, error_col])
    model = stage._model_bytes()
    inputs, outputs = _ort.model_specs(model)
    size, spec, output, layout = detector_plan(
        lambda message: fail(stage, message),
        inputs,
        outputs,
        stage.getOrDefault("imageSize") if stage.isDefined("imageSize") else None,
        stage.getOrDefault("modelFormat"),
        list(stage.getOrDefault("classNames")),
    )
    uid = stage.uid
    tensor, height, width, raw, image_error, model_error = (
        f"__{part}_{uid}"
        for part in ("tensor", "height", "width", "raw", "imageError", "modelError")
    )
    device = str(stage.getOrDefault("deviceType")).strip().lower()
    batch = int(stage.getOrDefault("miniBatchSize"))
    onnx = ONNXModel().setBackend("python")
    onnx.setParams(
        feedDict={spec.name: tensor},
        fetchDict={raw: output.name},
        errorCol=model_error,
        miniBatchSize=batch,
        deviceType=DEVICE_TYPES.get(device, device),
    )
    prepared = T.StructType(
        [
            *schema.fields,
            T.StructField(
                tensor,
                T.ArrayType(T.FloatType(), False),
                True,
                {"tensorShape": [3, size, size]},
            ),
            T.StructField(height, T.IntegerType(), True),
            T.StructField(width, T.IntegerType(), True),
            T.StructField(image_error, T.StringType(), True),
        ]
    )
    onnx_plan = _ort._shipped(dataset.sparkSession, _ort.plan(onnx, model, prepared))
    plan = DetectPlan(
        input_col=field.name,
        binary=isinstance(field.dataType, T.BinaryType),
        reduced=bool(stage.getOrDefault("reducedDecode")),
        size=size,
        setting=_pixel_setting(dataset),
        columns=len(schema.fields),
        tensor_col=tensor,
        height_col=height,
        width_col=width,
        image_error_col=image_error,
        raw_col=raw,
        model_error_col=model_error,
        onnx=onnx_plan,
        decoder=Decoder(
            layout,
            float(stage.getOrDefault("confidenceThreshold")),
            float(stage.getOrDefault("iouThreshold")),
            int(stage.getOrDefault("maxDetections")),
            tuple(stage.getOrDefault("classNames")),
        ),
        output_col=output_col,
        error_col=error_col,
        min_rows=onnx_plan.batch,
    )
    added = [
        T.StructField(output_col, detections_type(), True),
        T.StructField(error_col, T.StringType(), True),
    ]
    return run_step(
        dataset,
        Step(_detect, plan),
        added,
        lambda out: out,
        [sys.modules[__name__], _cv, _headers, _ort],
    )


def transform_crops(stage: Any, dataset: Any) -> Any:
    """CropDetections' output on the Python backend."""
    from pyspark.sql import types as T

    from mmlspark.core.checks import require_absent, require_column_type, require_distinct
    from mmlspark.core.fused import Step, run_step
    from mmlspark.image import _headers
    from mmlspark.opencv import _cv

    schema = dataset.schema
    input_col = stage.getOrDefault("inputCol")
    field = require_column_type(stage, schema, input_col, INPUT_DESCRIPTION, _binary_or_image)
    detections_field = require_column_type(
        stage,
        schema,
        stage.getOrDefault("detectionsCol"),
        DETECTIONS_DESCRIPTION,
        is_detections,
    )
    kept = T.StructType([f for f in schema.fields if f.name != input_col])
    index_col, detection_col, output_col, error_col = (
        stage.getOrDefault(name)
        for name in ("detectionIndexCol", "detectionCol", "outputCol", "errorCol")
    )
    added_names = [index_col, detection_col, output_col, error_col]
    for name in added_names:
        require_absent(stage, kept, name)
    require_distinct(stage, "output columns", added_names)
    plan = CropPlan(
        input_col=input_col,
        detections_col=detections_field.name,
        binary=isinstance(field.dataType, T.BinaryType),
        kept=tuple(i for i, f in enumerate(schema.fields) if f.name != input_col),
        threshold=float(stage.getOrDefault("confidenceThreshold")),
        categories=frozenset(stage.getOrDefault("categories")),
        square=bool(stage.getOrDefault("square")),
        keep_uncropped=bool(stage.getOrDefault("keepUncropped")),
        setting=_pixel_setting(dataset),
        index_col=index_col,
        detection_col=detection_col,
        output_col=output_col,
        error_col=error_col,
    )
    detections_array = detections_field.dataType
    assert isinstance(detections_array, T.ArrayType)  # is_detections checked it
    added = [
        T.StructField(index_col, T.IntegerType(), True),
        T.StructField(detection_col, detections_array.elementType, True),
        T.StructField(output_col, _cv.image_type(), True),
        T.StructField(error_col, T.StringType(), True),
    ]
    return run_step(
        dataset,
        Step(_crops, plan),
        added,
        lambda out: out,
        [sys.modules[__name__], _cv, _headers],
        keep=tuple(f.name for f in kept.fields),
    )
