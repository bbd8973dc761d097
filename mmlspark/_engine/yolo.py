"""ObjectDetector in the Python workers: the image decoded as ``ImageTransformer`` decodes it (EXIF
orientation, the smallest JPEG scale covering the square with ``reducedDecode``), the
``letterbox`` operation (bilinear, padded evenly with 114), an RGB CHW tensor of values / 255, the
model run as the JVM's inner ``ONNXModel`` runs it (``ort``: one session per worker,
mini-batches), then ``YoloDecoder`` (``scala/.../detection``): candidates over the threshold in
float32 as the JVM computes them, greedy per-class suppression in order of confidence (ties by box
index) with the same IoU rule, at most ``maxDetections`` kept, boxes mapped back through the
letterbox to fractions of the image. Error texts are the JVM's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.decode import decode
from mmlspark._engine.files import max_pixels
from mmlspark._engine.images import Decoding, file_decoder
from mmlspark._engine.java import java_max, java_min
from mmlspark._engine.messages import row_message
from mmlspark._engine.ops import Image, Op, apply, to_chw
from mmlspark._engine.ort import Plan as OrtPlan
from mmlspark._engine.ort import partition as scored
from mmlspark._engine.rows import RowError, Task, computed, describe, list_array, list_views
from mmlspark._engine.structs import from_struct, order_of

V5, V8 = "yolov5", "yolov8"
FORMATS = ("auto", V5, V8)
PAD_VALUE = 114.0
# At most this many candidates go into the suppression, the most confident first (YoloDecoder).
MAX_CANDIDATES = 30000


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
            row_message("yoloLayout", shape=_shape_text(row_shape), why=row_message(why))
        )

    if len(row_shape) != 2:
        raise fail("yoloNotTwoDimensions")
    a, b = int(row_shape[0]), int(row_shape[1])
    chosen = str(model_format).strip().lower()
    if chosen not in FORMATS:
        raise ValueError(f"'{model_format}' is not one of 'auto', 'yolov5', 'yolov8'")

    def v5() -> Layout:
        if b >= 6:
            return Layout(V5, b - 5)
        raise fail("yoloNotV5")

    def v8() -> Layout:
        if a >= 5:
            return Layout(V8, a - 4)
        raise fail("yoloNotV8")

    if chosen == V5:
        return v5()
    if chosen == V8:
        return v8()
    # The attributes' dimension is fixed (and big enough); of two such, the smaller one.
    if b >= 6 and (a < 5 or b < a):
        return v5()
    if a >= 5 and (b < 6 or a < b):
        return v8()
    raise fail("yoloAmbiguous")


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
            raise RowError(
                "requirement failed: " + row_message("letterboxEmpty", width=width, height=height)
            )
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
        return java_min(
            java_max((x - self.left) * self.width / self.scaled_width, 0.0), float(self.width)
        )

    def to_image_y(self, y: float) -> float:
        return java_min(
            java_max((y - self.top) * self.height / self.scaled_height, 0.0), float(self.height)
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
        raise RowError(row_message("noDetectorOutput"))
    layout = decoder.layout
    per = layout.attributes
    if raw.size % per != 0:
        raise RowError(
            row_message(
                "detectorOutputSize",
                values=raw.size,
                per=per,
                format=layout.format,
                classes=layout.classes,
            )
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


@dataclass(frozen=True)
class FileSource:
    """ObjectDetector on ``read_images``' own output: each file read and decoded once, with the
    read's settings (`decoding`) at `scale` (reduce, min height, min width), the read's refusals
    kept; the listing's error in `listing_error_col`, the read's error written to
    `read_error_col` (the JVM's ``ObjectDetector.fromFiles``)."""

    decoding: Decoding
    scale: tuple[int, int, int]
    file_setting: str | None  # spark.mmlspark.image.maxFileBytes
    listing_error_col: str
    read_error_col: str


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
    files: FileSource | None = None  # the files of read_images' own output, read here


def _letterboxed(plan: DetectPlan, value: Any, limit: int) -> tuple[np.ndarray, int, int]:
    """The image's RGB CHW tensor of values / 255 letterboxed to the plan's square, with the
    decoded image's height and width (``ObjectDetector.toTensor``)."""
    if plan.binary:
        if value is None:
            raise RowError(row_message("noImage"))
        target = plan.size if plan.reduced else 0
        pixels = decode(value, "color", True, 1, target, target, limit)
    else:
        pixels = from_struct(value)
    return _boxed(plan, pixels)


def _boxed(plan: DetectPlan, pixels: np.ndarray) -> tuple[np.ndarray, int, int]:
    height, width = pixels.shape[:2]
    Geometry.of(height, width, plan.size)  # an empty image fails with the JVM's words
    box = Op("letterbox", {"size": plan.size, "padValue": PAD_VALUE})
    chw = to_chw(apply(box, Image(pixels, order_of(pixels))), "RGB")
    return np.divide(chw, np.float32(255), dtype=np.float32), int(height), int(width)


def _from_file(plan: DetectPlan, files: FileSource, limit: int) -> Any:
    """(path, the listing's error) -> ((tensor, height, width) or None, the read's error): the
    file decoded once, after the checks of a decode with the read's settings, then letterboxed
    (its failure raised: the image's error)."""
    decoded = file_decoder(files.decoding, files.scale, files.file_setting, limit)

    def from_file(path: Any, listing_error: Any) -> tuple[Any, str | None]:
        try:
            pixels = decoded(path, listing_error)
        except Exception as error:  # noqa: BLE001 (the read's error, as the read gives it)
            return None, describe(error)
        return _boxed(plan, pixels), None

    return from_file


def _prepared(plan: DetectPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The rows with their tensor, image size and image error (on read_images' files, after the
    read's error), in batches of a few full mini-batches (bounded in bytes), so the model runs
    full batches while memory stays bounded."""
    import pyarrow as pa  # type: ignore[import-untyped]

    limit = max_pixels(plan.setting)
    files = plan.files
    names = [plan.tensor_col, plan.height_col, plan.width_col, plan.image_error_col]
    compute: Any
    if files is None:

        def inputs(part: Any) -> Iterator[tuple[tuple[Any, ...], None]]:
            for value in part.column(plan.input_col).to_pylist():
                yield (value,), None

        def compute(value: Any) -> tuple[Any, None]:
            return _letterboxed(plan, value, limit), None

    else:
        names.insert(0, files.read_error_col)
        compute = _from_file(plan, files, limit)

        def inputs(part: Any) -> Iterator[tuple[tuple[Any, ...], None]]:
            paths = part.column(plan.input_col).to_pylist()
            listed = part.column(files.listing_error_col).to_pylist()
            for path, listing_error in zip(paths, listed, strict=True):
                yield (path, listing_error), None

    def size_of(value: tuple[Any, str | None]) -> int:
        return 0 if value[0] is None else int(value[0][0].nbytes)

    for rows, values, errors in computed(batches, inputs, compute, size_of, plan.min_rows):
        boxed = [None if v is None else v[0] for v in values]
        tensors, heights, widths = ([None if v is None else v[i] for v in boxed] for i in range(3))
        read_errors = [None if v is None else v[1] for v in values]
        # A file the read could not decode gives the detector no image, as a null image does.
        errors = [
            row_message("noImage") if r is not None else e
            for r, e in zip(read_errors, errors, strict=True)
        ]
        arrays = [
            *rows.columns,
            *([pa.array(read_errors, pa.string())] if files is not None else []),
            list_array(tensors, pa.float32()),
            pa.array(heights, pa.int32()),
            pa.array(widths, pa.int32()),
            pa.array(errors, pa.string()),
        ]
        yield pa.RecordBatch.from_arrays(arrays, names=[*rows.schema.names, *names])


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
        raws = list_views(batch.column(plan.raw_col))
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
                    error = describe(failure)
            found.append(value)
            errors.append(error)
        arrays = [batch.column(i) for i in range(plan.columns)]
        arrays += [pa.array(found, type=kind), pa.array(errors, pa.string())]
        names = [*batch.schema.names[: plan.columns], plan.output_col, plan.error_col]
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def detect(plan: DetectPlan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """ObjectDetector's rows: letterboxed, scored by onnxruntime, decoded, in one pass."""
    return _decoded(plan, scored(plan.onnx, _prepared(plan, batches), task))
