"""An independent reference for what a YOLO detector's raw output means: the letterbox, the
decoding, per-class non-maximum suppression and the boxes mapped back to the image.

It is written from the formats' definitions, not from mmlspark's decoders (``YoloDecoder`` in
``YoloOutput.scala``, ``mmlspark/_engine/yolo.py``): YOLOv5's output is [K, 5 + C] per image
(cx, cy, w, h, objectness, C class scores), a box is a candidate when its objectness is over the
confidence threshold and its confidence (objectness x its best class score) is too; YOLOv8's is
[4 + C, K] with no objectness, the confidence being the best class score. Candidates are taken
most confident first (at most ``max_nms`` of them, YOLOv5's ``max_nms``), suppressed per class
(a box goes when its IoU with a kept box of its class is over ``iou_threshold``), and at most
``max_det`` of the survivors are kept, most confident first. Boxes are mapped back through the
letterbox that was applied (YOLOv5's ``letterbox``, ``auto=False``): the integer pad taken off,
the per-axis resize undone, clipped to the image; bboxes are MegaDetector's fractions
[x_min, y_min, width, height].

numpy does the decoding (whole arrays at once); OpenCV's ``cv2.dnn.NMSBoxes`` does the
suppression, once per class (a stable sort by score, then greedy: a box is kept when its overlap
with every kept box is at most the threshold). ``NMSBoxesBatched`` is not used: it keeps classes
apart by shifting each box by class x (largest coordinate + 1), which boxes with negative
coordinates defeat and which rounds the coordinates.

Where mmlspark's contract settles what Ultralytics' code leaves open, the contract is followed, and
said here:

- Equal confidences go to the lower box index (torch's sort leaves their order open). Within a
  class OpenCV's stable sort gives this, as the boxes are given to it in index order; across
  classes the survivors are merged by (-confidence, box index).
- A NaN class score is never a box's best class (torch's ``max`` would spread the NaN and drop
  the box). A box with a NaN coordinate overlaps nothing (its IoU is NaN, which is over no
  threshold): it is neither suppressed nor suppresses, and it is not given to OpenCV.
- A box without a positive area overlaps nothing either (torchvision's 0 / 0 is NaN, which is over
  no threshold); OpenCV counts two such boxes as identical (its ``jaccardDistance`` returns 0 for
  two empty boxes), so they are not given to it and are kept.
- Thresholds are compared in float32, the outputs' type.

OpenCV rounds ``1 - IoU`` to float32 before comparing the overlap with ``float32(threshold)``;
exact arithmetic compares the IoU with the threshold. The two disagree only for an IoU within
about 1e-7 of the threshold (or a positive IoU under about 3e-8 with a threshold of 0). Rather
than hide such a pair, the reference refuses it (a ValueError names the boxes), so its answer is
never a rounding accident: the tests' boxes are chosen, and checked, to stay out of that band.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

NAMES = ("animal", "person", "vehicle")
MAX_NMS = 30000  # YOLOv5's max_nms: the most confident candidates that go into the suppression
PAD = 114

Detection = tuple[str, str, float, list[float]]


def letterbox_geometry(height: int, width: int, size: int) -> tuple[int, int, int, int]:
    """YOLOv5's letterbox of a `height` x `width` image into a `size` square (auto=False,
    scaleup=True): (new_h, new_w, top, left)."""
    r = min(size / height, size / width)
    new_w, new_h = int(round(width * r)), int(round(height * r))
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    return new_h, new_w, int(round(dh - 0.1)), int(round(dw - 0.1))


def letterbox(image: np.ndarray, size: int, pad: int = PAD) -> np.ndarray:
    """YOLOv5's letterbox (auto=False): bilinear resize, then an even border of `pad`."""
    h, w = image.shape[:2]
    new_h, new_w, top, left = letterbox_geometry(h, w, size)
    if (new_w, new_h) != (w, h):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    bottom, right = size - new_h - top, size - new_w - left
    return cv2.copyMakeBorder(
        image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(pad, pad, pad)
    )


def _pairwise_iou(xyxy: np.ndarray) -> np.ndarray:
    """IoU of every pair of boxes (x1, y1, x2, y2), each with a positive area, in doubles."""
    lo = np.maximum(xyxy[:, None, :2], xyxy[None, :, :2])
    hi = np.minimum(xyxy[:, None, 2:], xyxy[None, :, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=2)
    area = np.prod(xyxy[:, 2:] - xyxy[:, :2], axis=1)
    return inter / (area[:, None] + area[None, :] - inter)  # type: ignore[no-any-return]


def _refuse_rounding_ties(boxes: np.ndarray, xyxy: np.ndarray, iou_threshold: float) -> None:
    """A ValueError when OpenCV's float32 overlap would decide a pair otherwise than the exact
    IoU (see the module docstring)."""
    iou = _pairwise_iou(xyxy)
    exact = iou > iou_threshold
    rounded = np.float32(1) - (1 - iou).astype(np.float32) > np.float32(iou_threshold)
    differ = np.argwhere(np.triu(exact != rounded, 1))
    if differ.size:
        i, j = differ[0]
        raise ValueError(
            f"boxes {boxes[i]} and {boxes[j]} have an IoU of {iou[i, j]!r}, within float32 "
            f"rounding of the IoU threshold {iou_threshold}: choose other boxes"
        )


def _suppress(
    boxes: np.ndarray, xyxy: np.ndarray, conf: np.ndarray, threshold: float, iou_threshold: float
) -> np.ndarray:
    """The boxes (indices into `boxes`, all of one class, in index order) that survive greedy
    suppression, by OpenCV."""
    x1, y1, x2, y2 = xyxy.T
    measurable = np.isfinite(xyxy).all(axis=1) & (x2 > x1) & (y2 > y1)
    inside = np.flatnonzero(measurable)
    _refuse_rounding_ties(boxes[inside], xyxy[inside], iou_threshold)
    rects = np.stack([x1, y1, x2 - x1, y2 - y1], axis=1)[inside]
    survivors = cv2.dnn.NMSBoxes(rects, conf[inside], float(threshold), float(iou_threshold))
    kept = inside[np.asarray(survivors, dtype=np.int64).reshape(-1)]
    return np.concatenate([kept, np.flatnonzero(~measurable)])


def detect(
    raw: np.ndarray,
    layout: str,
    image_hw: tuple[int, int],
    size: int,
    threshold: float,
    iou_threshold: float = 0.45,
    max_det: int = 300,
    names: Sequence[str] = NAMES,
    max_nms: int = MAX_NMS,
) -> list[Detection]:
    """The detections in one image's raw output (float32, [K, 5 + C] for yolov5, [4 + C, K] for
    yolov8) of a `size` square letterboxed from an `image_hw` image: (category, label, conf,
    bbox), most confident first; the category is the class index + 1 as text."""
    x = np.asarray(raw, dtype=np.float32)
    x = x.reshape(x.shape[-2:])
    if layout == "yolov5":
        boxes, objectness = x[:, :4], x[:, 4]
        scores = x[:, 5:] * objectness[:, None]
        eligible = objectness > np.float32(threshold)
    elif layout == "yolov8":
        x = x.T
        boxes, scores = x[:, :4], x[:, 4:]
        eligible = np.ones(len(x), dtype=bool)
    else:
        raise ValueError(f"no such layout: {layout}")
    scores = np.where(np.isnan(scores), np.float32(-np.inf), scores)
    cls, conf = scores.argmax(axis=1), scores.max(axis=1)
    candidates = np.flatnonzero(eligible & (conf > np.float32(threshold)))
    # The max_nms most confident (ties: the lower index), then back in index order.
    candidates = np.sort(candidates[np.argsort(-conf[candidates], kind="stable")][:max_nms])
    cx, cy, w, h = boxes.astype(np.float64).T
    xyxy = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)

    survivors = []
    for c in np.unique(cls[candidates]):
        members = candidates[cls[candidates] == c]
        kept = _suppress(boxes[members], xyxy[members], conf[members], threshold, iou_threshold)
        survivors.append(members[kept])
    kept = np.concatenate(survivors) if survivors else np.zeros(0, dtype=np.int64)
    kept = kept[np.lexsort((kept, -conf[kept]))][:max_det]

    image_h, image_w = image_hw
    new_h, new_w, top, left = letterbox_geometry(image_h, image_w, size)
    x1, x2 = (np.clip((xyxy[kept, k] - left) / (new_w / image_w), 0, image_w) for k in (0, 2))
    y1, y2 = (np.clip((xyxy[kept, k] - top) / (new_h / image_h), 0, image_h) for k in (1, 3))
    bboxes = np.stack([x1 / image_w, y1 / image_h, (x2 - x1) / image_w, (y2 - y1) / image_h], 1)
    return [
        (str(cls[i] + 1), names[cls[i]], float(conf[i]), [float(v) for v in bbox])
        for i, bbox in zip(kept, bboxes, strict=True)
    ]
