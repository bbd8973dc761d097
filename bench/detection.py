"""Benchmark: detection next to whole-image classification on the same camera-trap-size photos.
4000x3000 JPEGs made in code (bench/camera_trap.py's), side by side in one run on two cores:
  - detector, mmlspark: Spark's binaryFile source -> ObjectDetector decoding the bytes in the
    same pass at 1/4 (1000x750, the smallest JPEG scale that covers 640) -> letterbox 640 -> a
    YOLOv5s-sized detector (bench/models.py, random weights, MegaDetector v5's output layout) ->
    decoding, per-class NMS, boxes, on local[2],
  - detector, mmlspark, service off: the same with ONNXModel's inference service set off (on by
    default for ObjectDetector, on a CPU too),
  - detector, mmlspark, Python backend: the same ObjectDetector with setBackend("python")
    (opencv-python and onnxruntime in Arrow UDFs, as on compute that cannot load the jar),
  - detector, mmlspark, read_images (and its Python backend): the pipeline docs/detection.md
    shows, read_images -> ObjectDetector, where the detector reads the files itself at 1/4,
  - detector, raw Python: opencv-python (IMREAD_REDUCED_COLOR_4, YOLOv5's letterbox) in two
    threads, onnxruntime with two intra-op threads, the same decoding and NMS in numpy, in this
    process,
  - whole-image classification, mmlspark: binaryFile -> ImageTransformer (1/8 decode, 224x224,
    normalized) -> ONNXModel with the ResNet-50 architecture -> top class (bench/camera_trap.py's
    contender).
The JVM and Python backend detectors are checked against raw Python's numpy decoding and NMS (the
reference): the same detections (class, confidence, box) on (nearly) every photo.
One protocol for all (bench/protocol.py): --warmups untimed and --repeats timed rounds, the order
reversed every round, medians with their range. Writes bench/results/detection.md and .json. Not a
test. The quick (smoke) run classifies with a tiny CNN in place of ResNet-50 (bench/models.py's
quick_classifier).

Usage: python bench/detection.py [--images N] [--repeats R] [--warmups W] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import models  # noqa: E402
import protocol  # noqa: E402
from camera_trap import make_photos, mmlspark_pipeline  # noqa: E402
from end_to_end import noop  # noqa: E402
from onnx_inference import rates_of, ratios_of, report_rounds, service_off  # noqa: E402

SIZE = 640
BATCH = 8
THRESHOLD = 0.005


def letterboxed(encoded: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """Decode at 1/4, YOLOv5's letterbox to SIZE (padding 114), RGB / 255, CHW float32; and the
    decoded photo's height and width."""
    img = cv2.imdecode(encoded, cv2.IMREAD_REDUCED_COLOR_4)
    h, w = img.shape[:2]
    r = min(SIZE / h, SIZE / w)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, left = (SIZE - new_h) // 2, (SIZE - new_w) // 2
    img = cv2.copyMakeBorder(
        img, top, SIZE - new_h - top, left, SIZE - new_w - left, cv2.BORDER_CONSTANT,
        value=(114, 114, 114),
    )  # fmt: skip
    return (img[:, :, ::-1].astype(np.float32) / np.float32(255)).transpose(2, 0, 1), (h, w)


#: A detection: class index, confidence, [x, y, width, height] as fractions of the photo.
Detection = tuple[int, float, tuple[float, float, float, float]]


def boxes(
    raw: np.ndarray, height: int, width: int, iou_threshold: float = 0.45, max_det: int = 300
) -> list[Detection]:
    """The detections YOLOv5-layout output `raw` [K, 5 + C] of a `height` x `width` photo keeps:
    best class, confidence objectness x class score over THRESHOLD, greedy per-class NMS, the
    boxes mapped back as YOLOv5 does (less the letterbox's padding, over its gain, clipped to the
    photo)."""
    objectness = raw[:, 4]
    raw = raw[objectness > THRESHOLD]
    scores = raw[:, 5:] * raw[:, 4:5]
    cls, conf = scores.argmax(1), scores.max(1)
    keep = conf > THRESHOLD
    raw, cls, conf = raw[keep], cls[keep], conf[keep]
    order = np.lexsort((np.arange(len(conf)), -conf))
    xy, wh = raw[:, :2].astype(np.float64), raw[:, 2:4].astype(np.float64)
    corners = np.concatenate([xy - wh / 2, xy + wh / 2], axis=1)
    kept: list[int] = []
    for i in order:
        if len(kept) == max_det:
            break
        same = [j for j in kept if cls[j] == cls[i]]
        if same:
            other = corners[same]
            lo, hi = (
                np.maximum(other[:, :2], corners[i, :2]),
                np.minimum(other[:, 2:], corners[i, 2:]),
            )
            inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
            areas = np.prod(other[:, 2:] - other[:, :2], axis=1)
            area = np.prod(corners[i, 2:] - corners[i, :2])
            if (inter / (areas + area - inter) > iou_threshold).any():
                continue
        kept.append(i)
    gain = min(SIZE / height, SIZE / width)
    pad_x, pad_y = (SIZE - width * gain) / 2, (SIZE - height * gain) / 2
    found = []
    for i in kept:
        x1, y1, x2, y2 = corners[i]
        x1, x2 = (np.clip((v - pad_x) / gain, 0, width) for v in (x1, x2))
        y1, y2 = (np.clip((v - pad_y) / gain, 0, height) for v in (y1, y2))
        box = (x1 / width, y1 / height, (x2 - x1) / width, (y2 - y1) / height)
        found.append((int(cls[i]), float(conf[i]), tuple(float(v) for v in box)))
    return found


def raw_python(paths: list[Path], model: bytes):
    """The function of one raw Python run, and the dict (file name -> detections) each run
    fills."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    found: dict[str, list[Detection]] = {}

    def run() -> None:
        with ThreadPoolExecutor(2) as pool:
            decoded = list(pool.map(lambda p: letterboxed(np.fromfile(p, np.uint8)), paths))
        for start in range(0, len(paths), BATCH):
            batch = decoded[start : start + BATCH]
            outputs = session.run(None, {"images": np.stack([t for t, _ in batch])})[0]
            for p, raw, (_, shape) in zip(
                paths[start : start + BATCH], outputs, batch, strict=True
            ):
                found[p.name] = boxes(raw, *shape)

    return run, found


def detector_pipeline(spark, folder: Path, model: bytes, backend: str = "jvm"):
    """The function of the rows (path, detections, detectionError) of ObjectDetector on the
    photos."""
    from mmlspark.detection import ObjectDetector

    stage = ObjectDetector(inputCol="content", confidenceThreshold=THRESHOLD, miniBatchSize=BATCH)
    stage = stage.setBackend(backend).setModelPayload(model)

    def found():
        files = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
        out = stage.transform(files.load(str(folder)))
        return out.select("path", "detections", "detectionError")

    return found


def read_images_pipeline(spark, folder: Path, model: bytes, backend: str = "jvm"):
    """The function of the rows (path, detections, detectionError) of read_images ->
    ObjectDetector on the photos, as docs/detection.md writes it."""
    from mmlspark.detection import ObjectDetector
    from mmlspark.image import read_images

    stage = ObjectDetector(inputCol="image", confidenceThreshold=THRESHOLD, miniBatchSize=BATCH)
    stage = stage.setBackend(backend).setModelPayload(model)

    def found():
        out = stage.transform(read_images(spark, str(folder), backend=backend))
        return out.select("path", "detections", "detectionError")

    return found


def detections_of(found) -> dict[str, list[Detection]]:
    rows = found().collect()
    assert all(r.detectionError is None for r in rows), [r.detectionError for r in rows][:3]
    return {
        Path(r.path).name: [(int(d.category) - 1, d.conf, tuple(d.bbox)) for d in r.detections]
        for r in rows
    }


def matches(a: list[Detection], b: list[Detection]) -> bool:
    """Whether two photos' detections are the same one to one: class, confidence within 1e-4,
    box within 2e-3 of the photo's size (a pixel of the 1/4 decode is about 1e-3)."""

    def key(d: Detection) -> tuple:
        return (d[0], -round(d[1], 4), d[2])

    return len(a) == len(b) and all(
        x[0] == y[0]
        and abs(x[1] - y[1]) <= 1e-4
        and max(abs(u - v) for u, v in zip(x[2], y[2], strict=True)) <= 2e-3
        for x, y in zip(sorted(a, key=key), sorted(b, key=key), strict=True)
    )


def same_detections(found: dict, reference: dict) -> float:
    """The share of photos whose detections match the numpy reference's (raw Python's)."""
    share = sum(matches(found[k], reference[k]) for k in reference) / len(reference)
    assert set(found) == set(reference) and share >= 0.9, (found, reference)
    return share


def run(argv: list[str] | None = None) -> dict:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds before them")
    parser.add_argument(
        "--quick", action="store_true", help="4 photos, 1 round, no warm-up, a tiny CNN"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "detection.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.repeats, args.warmups = 4, 1, 0

    import mmlspark

    spark = mmlspark.session("local[2]", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    detector = models.yolo_detector(SIZE)
    classifier_name, classifier = models.classifier(args.quick)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        paths = make_photos(folder, args.images)
        jvm = detector_pipeline(spark, folder, detector)
        python = detector_pipeline(spark, folder, detector, backend="python")
        read = read_images_pipeline(spark, folder, detector)
        python_read = read_images_pipeline(spark, folder, detector, backend="python")
        raw_run, raw_found = raw_python(paths, detector)
        classify = mmlspark_pipeline(spark, folder, classifier, binary=True)

        def unserved() -> None:
            with service_off(spark):
                noop(jvm())

        rounds = protocol.measure(
            {
                "detector_mmlspark": lambda: noop(jvm()),
                "detector_mmlspark_service_off": unserved,
                "detector_mmlspark_python_backend": lambda: noop(python()),
                "detector_mmlspark_read_images": lambda: noop(read()),
                "detector_mmlspark_python_read_images": lambda: noop(python_read()),
                "detector_raw_python": raw_run,
                "whole_image_classification_mmlspark": lambda: noop(classify()),
            },
            warmups=args.warmups,
            rounds=args.repeats,
        )
        found, python_found = detections_of(jvm), detections_of(python)
        read_found, python_read_found = detections_of(read), detections_of(python_read)
        spark.stop()
    figures = {
        "images": args.images,
        **rates_of(rounds, args.images),
        "boxes_per_photo": sum(map(len, found.values())) / len(found),
        "same_detections_share": same_detections(found, raw_found),
        "python_backend_same_detections_share": same_detections(python_found, raw_found),
        "read_images_same_detections_share": same_detections(read_found, raw_found),
        "python_read_images_same_detections_share": same_detections(python_read_found, raw_found),
        **ratios_of(rounds, RATIOS),
    }
    report_rounds(
        args.out,
        "Detection benchmark",
        f"python bench/detection.py --images {args.images} --repeats {args.repeats} --warmups"
        f" {args.warmups}{' --quick' if args.quick else ''}",
        "4000x3000 JPEGs -> (detector) decode at 1/4 -> letterbox 640 -> YOLOv5s-sized detector"
        " (random weights, 25 200 boxes) -> NMS, next to (classification) decode at 1/8 -> 224x224"
        f" -> {classifier_name} -> top class.",
        "photos",
        rounds,
        args.images,
        "detector_mmlspark",
        "detector >= 1.0x raw Python (same decode, model and NMS); its Python backend >= 0.8x the"
        " JVM detector",
        figures,
    )
    return figures


#: Figure name: (contender, contender) whose per-round rate ratio it is.
RATIOS = {
    "detector_vs_raw_python": ("detector_mmlspark", "detector_raw_python"),
    "detector_vs_whole_image_classification": (
        "detector_mmlspark",
        "whole_image_classification_mmlspark",
    ),
    "service_on_vs_off": ("detector_mmlspark", "detector_mmlspark_service_off"),
    "detector_python_backend_vs_jvm": ("detector_mmlspark_python_backend", "detector_mmlspark"),
    "detector_python_backend_vs_raw_python": (
        "detector_mmlspark_python_backend",
        "detector_raw_python",
    ),
    "read_images_detector_vs_raw_python": ("detector_mmlspark_read_images", "detector_raw_python"),
    "python_read_images_vs_jvm_read_images": (
        "detector_mmlspark_python_read_images",
        "detector_mmlspark_read_images",
    ),
}


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


if __name__ == "__main__":
    main()
