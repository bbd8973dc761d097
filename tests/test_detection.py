"""ObjectDetector against an independent numpy/OpenCV reference of YOLO's letterbox, decoding and
per-class non-maximum suppression, on detectors built in code (tests/onnx_models.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import onnx_models
import pytest
from detection_reference import NAMES, detect, letterbox
from image_fixtures import encode, pattern, with_exif_orientation
from pyspark.ml import Pipeline, PipelineModel

from mmlspark.detection import CropDetections, ObjectDetector
from mmlspark.image import read_images
from mmlspark.onnx import ImageFeaturizer
from mmlspark.opencv import ImageTransformer

SIZE = 32  # the echo detector's input


def assert_same_detections(got, expected) -> None:
    assert [(d["category"], d["label"]) for d in got] == [(e[0], e[1]) for e in expected]
    for d, e in zip(got, expected, strict=True):
        assert d["conf"] == pytest.approx(e[2], abs=1e-6)
        np.testing.assert_allclose(d["bbox"], e[3], atol=1e-6)


# --- images that spell the echo detector's output -------------------------------------------


def spelled_scene(layout: str, seed: int, boxes: int = 16, classes: int = 3) -> np.ndarray:
    """Raw output pixels (0-255) with clusters of overlapping boxes of several classes, some
    under the threshold: [boxes, 5 + C] for yolov5, [4 + C, boxes] for yolov8."""
    rng = np.random.default_rng(seed)
    centers = rng.integers(60, 200, (3, 2))
    rows = []
    for k in range(boxes):
        cx, cy = centers[k % 3] + rng.integers(-6, 7, 2)
        w, h = rng.integers(30, 90, 2)
        scores = rng.integers(0, 256, classes)
        objectness = rng.integers(0, 256) if layout == "yolov5" else None
        rows.append([cx, cy, w, h, *([objectness] if objectness is not None else []), *scores])
    raw = np.array(rows, np.uint8)
    return raw if layout == "yolov5" else raw.T.copy()


def scene_image(pixels: np.ndarray) -> np.ndarray:
    """A SIZE x SIZE BGR image whose red channel's top-left holds ``pixels``."""
    image = np.zeros((SIZE, SIZE, 3), np.uint8)
    image[: pixels.shape[0], : pixels.shape[1], 2] = pixels
    return image


def echo_raw(pixels: np.ndarray, layout: str) -> np.ndarray:
    """What the echo detector gives for ``pixels``, in float32 as the JVM and ONNX Runtime do."""
    values = pixels.astype(np.float32) / np.float32(255)
    scale = np.array(
        [SIZE] * 4 + [1] * (values.shape[1 if layout == "yolov5" else 0] - 4), np.float32
    )
    return values * (scale[None, :] if layout == "yolov5" else scale[:, None])


@pytest.mark.lines
@pytest.mark.parametrize("layout", ["yolov5", "yolov8"])
def test_decoding_and_suppression_equal_the_reference(spark, layout):
    scenes = {f"s{seed}": spelled_scene(layout, seed) for seed in range(6)}
    df = spark.createDataFrame(
        [(name, encode(scene_image(p), ".png")) for name, p in scenes.items()], ["name", "content"]
    )
    detector = ObjectDetector(inputCol="content", confidenceThreshold=0.25, miniBatchSize=4)
    detector.setModelPayload(onnx_models.yolo_echo(layout=layout))
    rows = {r["name"]: r for r in detector.transform(df).collect()}
    suppressed = 0
    for name, pixels in scenes.items():
        raw = echo_raw(pixels, layout)
        expected = detect(raw, layout, (SIZE, SIZE), SIZE, 0.25)
        assert rows[name]["detectionError"] is None
        assert_same_detections(rows[name]["detections"], expected)
        unsuppressed = detect(raw, layout, (SIZE, SIZE), SIZE, 0.25, iou_threshold=1.0)
        suppressed += len(unsuppressed) - len(expected)
        assert {e[0] for e in expected} == {e[0] for e in unsuppressed}
    assert suppressed > 0  # the scenes do overlap, so suppression was exercised
    assert sum(len(r["detections"]) for r in rows.values()) > 6


def test_max_detections_and_threshold_keep_the_most_confident(spark):
    pixels = spelled_scene("yolov5", 3)
    df = spark.createDataFrame([(encode(scene_image(pixels), ".png"),)], ["content"])
    detector = ObjectDetector(inputCol="content", confidenceThreshold=0.1, maxDetections=2)
    detector.setModelPayload(onnx_models.yolo_echo())
    got = detector.transform(df).first()["detections"]
    expected = detect(echo_raw(pixels, "yolov5"), "yolov5", (SIZE, SIZE), SIZE, 0.1, max_det=2)
    assert len(expected) == 2
    assert_same_detections(got, expected)


@pytest.mark.parametrize("shape", [(300, 120), (90, 400), (64, 64), (20, 30), (47, 63)])
def test_letterbox_operation_equals_yolo_letterbox(spark, tmp_path, shape):
    image = pattern(*shape, seed=4)
    (tmp_path / "x.png").write_bytes(encode(image, ".png"))
    out = ImageTransformer().letterbox(64).transform(read_images(spark, str(tmp_path))).first()
    assert out["transformError"] is None
    expected = letterbox(image, 64)
    got = np.frombuffer(out["transformed"]["data"], np.uint8).reshape(expected.shape)
    np.testing.assert_array_equal(got, expected)


# Boxes in the letterboxed 64 x 64 square: near its middle, at its corners, across its edge.
CONSTANT = np.array(
    [
        [32, 32, 20, 30, 0.9, 0.95, 0.1, 0.1],
        [6, 8, 12, 16, 0.8, 0.1, 0.9, 0.2],
        [60, 58, 20, 20, 0.7, 0.2, 0.1, 0.8],
        [33, 32, 20, 30, 0.1, 0.9, 0.0, 0.0],  # under the threshold
    ],
    np.float32,
)


@pytest.mark.lines
def test_boxes_map_back_to_tall_wide_rotated_and_large_photos(spark, tmp_path):
    tall, wide = pattern(300, 120, seed=1), pattern(90, 400, seed=2)
    jpeg = encode(pattern(120, 300, seed=3), ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90])
    large = cv2.resize(pattern(300, 400, seed=5), (4000, 3000))  # a 12 MP camera-trap photo
    files = {
        "tall.png": (encode(tall, ".png"), (300, 120)),
        "wide.png": (encode(wide, ".png"), (90, 400)),
        # Stored 300 wide and 120 high, shown rotated a quarter turn: 120 wide and 300 high.
        "rotated.jpg": (with_exif_orientation(jpeg, 6), (300, 120)),
        "large.jpg": (encode(large, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 85]), (3000, 4000)),
    }
    df = spark.createDataFrame([(n, b) for n, (b, _) in files.items()], ["name", "content"])
    detector = ObjectDetector(inputCol="content", imageSize=64, confidenceThreshold=0.5)
    detector.setModelPayload(onnx_models.yolo_constant(CONSTANT, size="S"))
    rows = {r["name"]: r for r in detector.transform(df).collect()}
    for name, (_, hw) in files.items():
        assert rows[name]["detectionError"] is None, rows[name]["detectionError"]
        expected = detect(CONSTANT, "yolov5", hw, 64, 0.5)
        assert len(expected) == 3
        if name == "large.jpg":
            # Decoded at 1/8 scale (500 x 375, still over 64): the same fractions, to a pixel.
            for d, e in zip(rows[name]["detections"], expected, strict=True):
                np.testing.assert_allclose(d["bbox"], e[3], atol=2e-3)
        else:
            assert_same_detections(rows[name]["detections"], expected)
    # The tall image's boxes lie within its 26 x 64 band of the square: x spans at most [0, 1].
    for d in rows["tall.png"]["detections"]:
        x, y, w, h = d["bbox"]
        assert 0 <= x and x + w <= 1 + 1e-9 and 0 <= y and y + h <= 1 + 1e-9


def test_image_structs_bad_rows_and_empty_images(spark, tmp_path):
    (tmp_path / "scene.png").write_bytes(encode(scene_image(spelled_scene("yolov5", 1)), ".png"))
    (tmp_path / "blank.png").write_bytes(encode(np.zeros((SIZE, SIZE, 3), np.uint8), ".png"))
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    images = read_images(spark, str(tmp_path))
    detector = ObjectDetector(confidenceThreshold=0.25).setModelPayload(onnx_models.yolo_echo())
    out = detector.transform(images)
    assert out.columns == [*images.columns, "detections", "detectionError"]
    rows = {Path(r["path"]).name: r for r in out.collect()}
    assert rows["blank.png"]["detections"] == [] and rows["blank.png"]["detectionError"] is None
    assert rows["scene.png"]["detections"]
    broken = rows["broken.jpg"]
    assert broken["detections"] is None and "no input image" in broken["detectionError"]
    assert out.count() == 3


def test_saved_detector_and_pipeline_load_and_give_the_same_detections(spark, tmp_path):
    scenes = [encode(scene_image(spelled_scene("yolov8", s)), ".png") for s in range(3)]
    df = spark.createDataFrame([(i, b) for i, b in enumerate(scenes)], ["id", "content"])
    detector = ObjectDetector(
        inputCol="content",
        confidenceThreshold=0.3,
        classNames=["a", "b", "c"],
        modelFormat="YOLOv8",
    ).setModelPayload(onnx_models.yolo_echo(layout="yolov8"))
    before = detector.transform(df).orderBy("id").collect()
    detector.save(str(tmp_path / "detector"))
    loaded = ObjectDetector.load(str(tmp_path / "detector"))
    assert loaded.getClassNames() == ["a", "b", "c"] and loaded.getModelFormat() == "YOLOv8"
    assert loaded.transform(df).orderBy("id").collect() == before
    Pipeline(stages=[detector]).fit(df).save(str(tmp_path / "pipeline"))
    again = PipelineModel.load(str(tmp_path / "pipeline")).transform(df).orderBy("id").collect()
    assert again == before
    assert {d["label"] for r in before for d in r["detections"]} <= {"a", "b", "c"}


def test_misconfigured_detectors_fail_before_any_job_with_the_reason(spark):
    df = spark.createDataFrame([(b"",)], ["content"])
    two_names = ObjectDetector(inputCol="content", classNames=["animal", "person"])
    two_names.setModelPayload(onnx_models.yolo_echo())
    with pytest.raises(Exception, match="3 classes.*classNames has 2"):
        two_names.transform(df)
    square = ObjectDetector(inputCol="content").setModelPayload(
        onnx_models.yolo_constant(np.zeros((8, 8), np.float32))
    )
    with pytest.raises(Exception, match="set modelFormat"):
        square.transform(df)
    assert square.setModelFormat("yolov5").transform(df).columns[-2:] == [
        "detections",
        "detectionError",
    ]
    with pytest.raises(Exception, match="imageSize is 640 but the model takes 32x32"):
        ObjectDetector(inputCol="content", imageSize=640).setModelPayload(
            onnx_models.yolo_echo()
        ).transform(df)


def test_detector_runs_from_a_model_file_on_classic_and_connect(session, tmp_path):
    model = tmp_path / "detector.onnx"
    model.write_bytes(onnx_models.yolo_echo())
    pixels = spelled_scene("yolov5", 2)
    df = session.createDataFrame([(encode(scene_image(pixels), ".png"),)], ["content"])
    detector = ObjectDetector(
        inputCol="content", modelLocation=str(model), confidenceThreshold=0.25
    )
    got = detector.transform(df).first()["detections"]
    assert_same_detections(
        got, detect(echo_raw(pixels, "yolov5"), "yolov5", (SIZE, SIZE), SIZE, 0.25)
    )


@pytest.mark.lines
def test_crops_of_detections_feed_a_featurizer(spark, tmp_path):
    """Detector -> CropDetections -> ImageFeaturizer: each crop is the original photo's region
    of its box (numpy slicing, MegaDetector's pixel rounding), at full resolution."""
    photo = pattern(300, 400, seed=8)
    files = {"photo.png": encode(photo, ".png"), "blank.png": encode(photo, ".png")}
    df = spark.createDataFrame(list(files.items()), ["path", "content"])
    raw = CONSTANT.copy()
    detector = ObjectDetector(inputCol="content", imageSize=64, confidenceThreshold=0.5)
    detector.setModelPayload(onnx_models.yolo_constant(raw, size="S"))
    found = detector.transform(df)
    crops = CropDetections(inputCol="content", confidenceThreshold=0.7).transform(found)
    rows = sorted(crops.filter("path = 'photo.png'").collect(), key=lambda r: r["detectionIndex"])
    expected = detect(raw, "yolov5", (300, 400), 64, 0.5)
    chosen = [i for i, e in enumerate(expected) if e[2] >= 0.7]
    assert [r["detectionIndex"] for r in rows] == chosen and len(chosen) == 2
    for r in rows:
        x, y, w, h = expected[r["detectionIndex"]][3]
        x0, y0 = int(x * 400), int(y * 300)
        region = photo[y0 : y0 + int(h * 300), x0 : x0 + int(w * 400)]
        got = np.frombuffer(r["crop"]["data"], np.uint8).reshape(region.shape)
        np.testing.assert_array_equal(got, region)
        assert r["detection"]["label"] == expected[r["detectionIndex"]][1]
        assert r["cropError"] is None

    squared = CropDetections(inputCol="content", confidenceThreshold=0.7, square=True)
    for r in squared.transform(found).collect():
        assert r["crop"]["height"] == r["crop"]["width"]

    featurizer = ImageFeaturizer(inputCol="crop", imageHeight=8, imageWidth=8)
    featurizer.setModelPayload(onnx_models.small_cnn(size=8)).setFeatureTensorName("features")
    features = featurizer.transform(crops).collect()
    assert len(features) == 4 and all(len(r["features"]) == 4 for r in features)


# --- the detect command -----------------------------------------------------------------------


def test_detect_command_writes_megadetector_results_and_resumes(spark, tmp_path):
    from megadetector.postprocessing.validate_batch_results import (
        ValidateBatchResultsOptions,
        validate_batch_results,
    )

    from mmlspark.apps.camera_trap import __main__ as cli

    images = tmp_path / "survey"
    (images / "cam1").mkdir(parents=True)
    scenes = {f"cam1/IMG_{i}.png": spelled_scene("yolov5", 10 + i) for i in range(3)}
    for name, pixels in scenes.items():
        (images / name).write_bytes(encode(scene_image(pixels), ".png"))
    (images / "blank.png").write_bytes(encode(np.zeros((SIZE, SIZE, 3), np.uint8), ".png"))
    detector = tmp_path / "detector.onnx"
    detector.write_bytes(onnx_models.yolo_echo())
    out = tmp_path / "detections"
    args = ["detect", "--images", str(images), "--detector", str(detector), "--out", str(out)]
    assert cli.main([*args, "--threshold", "0.25"]) == 0

    # A second sitting after new photos arrived (one unreadable): only those are run.
    later = "cam1/IMG_3.png"
    scenes[later] = spelled_scene("yolov5", 13)
    (images / later).write_bytes(encode(scene_image(scenes[later]), ".png"))
    (images / "notes.txt").write_text("not a photo")
    summary = job_detect(spark, images, detector, out)
    assert summary["scored"] == 2 and summary["photos"] == 6 and summary["failures"] == 1

    results = json.loads((out / "results.json").read_text())
    options = ValidateBatchResultsOptions()
    options.raise_errors = True
    checked = validate_batch_results(results, options)["validation_results"]
    assert checked["errors"] == [] and checked["warnings"] == []
    assert results["info"]["format_version"] == "1.6"
    assert results["detection_categories"] == {"1": "animal", "2": "person", "3": "vehicle"}
    entries = {e["file"]: e for e in results["images"]}
    assert list(entries) == sorted(entries) and set(entries) == {*scenes, "blank.png", "notes.txt"}
    assert entries["notes.txt"]["detections"] is None and entries["notes.txt"]["failure"]
    assert entries["blank.png"] == {
        "file": "blank.png",
        "max_detection_conf": 0.0,
        "detections": [],
    }
    for name, pixels in scenes.items():
        expected = detect(echo_raw(pixels, "yolov5"), "yolov5", (SIZE, SIZE), SIZE, 0.25)
        got = entries[name]["detections"]
        assert [d["category"] for d in got] == [e[0] for e in expected] and expected
        for d, e in zip(got, expected, strict=True):
            assert set(d) == {"category", "conf", "bbox"} and isinstance(d["conf"], float)
            assert d["conf"] == round(e[2], 3)
            assert d["bbox"] == [round(v, 4) for v in e[3]]
        assert entries[name]["max_detection_conf"] == round(expected[0][2], 3)

    rows = list(csv.DictReader((out / "detections.csv").open(newline="")))
    per_photo = {name: [r for r in rows if r["path"] == name] for name in entries}
    assert [r["category"] for r in per_photo["blank.png"]] == [""]
    assert per_photo["notes.txt"][0]["failure"]
    for name in scenes:
        assert len(per_photo[name]) == len(entries[name]["detections"])
        assert all(r["label"] in NAMES and float(r["conf"]) > 0.25 for r in per_photo[name])

    # Another detector's results in the same folder are refused without --overwrite.
    other = tmp_path / "other.onnx"
    other.write_bytes(onnx_models.yolo_echo(layout="yolov8"))
    again = ["detect", "--images", str(images), "--detector", str(other), "--out", str(out)]
    assert cli.main(again) == 2
    assert cli.main([*again, "--overwrite"]) == 0


def job_detect(spark, images: Path, detector: Path, out: Path) -> dict:
    from mmlspark.apps.camera_trap import job

    return job.detect(spark, str(images), str(detector), str(out), threshold=0.25)


def test_detect_refuses_a_model_that_is_no_detector(spark, tmp_path, capsys):
    from mmlspark.apps.camera_trap import __main__ as cli

    model = tmp_path / "cnn.onnx"
    model.write_bytes(onnx_models.small_cnn())
    (tmp_path / "photos").mkdir()
    code = cli.main(["detect", "--images", str(tmp_path / "photos"), "--detector", str(model),
                     "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    assert "is not a detector this job can run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_detection_metrics_count_the_empty_filter_and_boxes_at_iou_half(spark, tmp_path):
    from mmlspark.apps.camera_trap import job

    def det(conf, bbox):
        return {"category": "1", "label": "animal", "conf": conf, "bbox": bbox}

    rows = [  # (file, detections): truth in the CCT file below
        ("a.jpg", [det(0.9, [0.1, 0.1, 0.2, 0.2]), det(0.5, [0.6, 0.6, 0.1, 0.1])]),
        ("b.jpg", [det(0.8, [0.0, 0.0, 0.5, 0.5])]),  # misplaced
        ("c.jpg", [det(0.1, [0.2, 0.2, 0.1, 0.1])]),  # under the threshold: called empty
        ("d.jpg", [det(0.3, [0.4, 0.4, 0.2, 0.2])]),  # on an empty photo
        ("e.jpg", []),
    ]
    table = spark.createDataFrame(
        [(f"file:/s/{f}", 1, None, d, None, None, None, None, None, None, 1) for f, d in rows],
        job.DETECT_SCHEMA,
    )
    images = [
        {"id": i, "file_name": f, "width": 200, "height": 100} for i, (f, _) in enumerate(rows)
    ]
    boxes = {
        0: [[20, 10, 40, 20], [120, 60, 20, 10]],
        1: [[150, 70, 40, 20]],
        2: [[40, 20, 20, 10]],
    }
    annotations = [
        {"id": i, "image_id": i, "category_id": 1 if i in boxes else 0}
        | ({"bbox": boxes[i][k]} if i in boxes else {})
        for i in range(5)
        for k in range(len(boxes.get(i, [None])))
    ]
    labels = tmp_path / "cct.json"
    categories = [{"id": 0, "name": "empty"}, {"id": 1, "name": "deer"}]
    cct = {"images": images, "annotations": annotations, "categories": categories}
    labels.write_text(json.dumps(cct))
    metrics = job.evaluate_detections(
        spark, table, {"images": "file:/s"}, str(tmp_path / "eval"), labels=str(labels)
    )
    # Non-empty truth: a, b, c; said non-empty (>= 0.2): a, b, d.
    f = metrics["empty_filter"]
    assert (f["tp"], f["fp"], f["fn"], f["tn"]) == (2, 1, 1, 1)
    assert f["nonempty_precision"] == pytest.approx(2 / 3) and f[
        "nonempty_recall"
    ] == pytest.approx(2 / 3)
    # Boxes: a's two found, b's missed, c's missed (under threshold); d's detection is false.
    d = metrics["detection_iou50"]
    assert (d["matched"], d["truth"], d["detections"]) == (2, 4, 4)
    assert d["precision"] == pytest.approx(0.5) and d["recall"] == pytest.approx(0.5)
    assert (tmp_path / "eval" / "samples.png").is_file()
