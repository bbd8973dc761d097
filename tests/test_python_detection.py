"""The Python backend of ObjectDetector and CropDetections against the JVM stages.

Parity is the contract: each case runs a stage, with the same params, once with
``setBackend("jvm")`` and once with ``setBackend("python")`` over the same DataFrame, and checks
that the columns, their types (nested nullability included) and the row counts agree; that every
row has the same error text; that detections agree in number, order, category and label, with
``conf`` and ``bbox`` within 1e-5; and that crops are the same pixels, byte for byte (the two
backends decode with the same OpenCV). Expected errors are also checked against the JVM's words,
and good rows must have detections, so that two backends agreeing on a wrong null fail too.

The detectors are built in code: the camera-trap demo's synthetic YOLOv5 detector
(``mmlspark.apps.camera_trap.make_demo``) on its photos, the echo detectors of
``tests/onnx_models.py`` in the YOLOv5 and YOLOv8 layouts (their output is written in the image),
and constant detectors for the edges of thresholds, ties and suppression. The decoding itself is
also checked without Spark against ``detection_reference.detect``, written from the YOLOv5 and
YOLOv8 formats' definitions rather than from either decoder (numpy for the decoding and the
letterbox, OpenCV's ``cv2.dnn.NMSBoxes`` per class for the suppression; its module says where
mmlspark's contract settles what the formats leave open), with the same category, label and
float32 confidence and bboxes within 1e-12; the JVM's boxes of the edge cases are checked against
it too. The last test runs on a Spark Connect server without the jar, where ``auto`` picks the
Python backend.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from importlib.resources import files
from typing import Any

import cv2
import detection_reference as reference
import numpy as np
import onnx_models
import pytest
from image_fixtures import encode, pattern, with_exif_orientation
from pyspark.ml import PipelineModel
from pyspark.sql import DataFrame, Row
from pyspark.sql import types as T

from mmlspark._engine import java, yolo
from mmlspark.core.backend import set_backend
from mmlspark.core.persistence import load_pipeline, save_pipeline
from mmlspark.detection import ObjectDetector
from mmlspark.detection.crop_detections import CropDetections
from mmlspark.image import ImageDecoder

DEMO = files("mmlspark.apps.camera_trap") / "demo_data" / "detection"
NAMES = ["animal", "person", "vehicle"]
TOLERANCE = 1e-5  # between the backends
BBOX_TOLERANCE = 1e-12  # between the Python decoder and the reference, on fractions of the image
DETECTION = T.StructType(
    [
        T.StructField("category", T.StringType()),
        T.StructField("label", T.StringType()),
        T.StructField("conf", T.DoubleType(), False),
        T.StructField("bbox", T.ArrayType(T.DoubleType(), False)),
    ]
)


# -- decoding, against the reference ---------------------------------------------------------------


def random_raw(rng: np.random.Generator, fmt: str, boxes: int, classes: int = 3) -> np.ndarray:
    """Boxes in clusters (so that they overlap), scores on a coarse grid (so that confidences
    tie), some NaN: [boxes, 5 + C] for yolov5, [4 + C, boxes] for yolov8."""
    centers = rng.uniform(10, 54, (4, 2))
    rows = []
    for k in range(boxes):
        cx, cy = centers[k % 4] + rng.integers(-3, 4, 2)
        w, h = rng.integers(2, 30, 2)
        objectness = [rng.integers(0, 9) / 8] if fmt == "yolov5" else []
        scores = rng.integers(0, 9, classes) / 8
        rows.append([cx, cy, w, h, *objectness, *scores])
    raw = np.array(rows, np.float32)
    raw[rng.random(raw.shape) < 0.01] = np.nan
    return raw if fmt == "yolov5" else raw.T.copy()


def same_as_reference(got: list[dict[str, Any]], expected: list[reference.Detection]) -> None:
    """Detections equal the reference's: the same number, order, category, label and conf (both
    the float32 confidence, exactly), bboxes within BBOX_TOLERANCE (NaN where the reference's is;
    the two compute the same fractions in different orders)."""
    found = [(d["category"], d["label"], d["conf"]) for d in got]
    assert found == [e[:3] for e in expected]
    for i, (d, e) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(d["bbox"], e[3], rtol=0, atol=BBOX_TOLERANCE, err_msg=str(i))


@pytest.mark.parametrize("fmt", ["yolov5", "yolov8"])
@pytest.mark.parametrize("seed", range(6))
def test_decoding_equals_the_reference(fmt, seed):
    rng = np.random.default_rng(seed)
    raw = random_raw(rng, fmt, boxes=40 + 30 * seed)
    hw = (int(rng.integers(20, 90)), int(rng.integers(20, 90)))
    counts, nan_boxes = {}, {}
    for threshold in (0.0, 0.25, 0.5):
        for iou_threshold in (0.0, 0.45, 1.0):
            for max_detections in (1, 5, 300):
                settings = (threshold, iou_threshold, max_detections)
                decoder = yolo.Decoder(yolo.Layout(fmt, 3), *settings, tuple(NAMES))
                got = yolo.detections(raw.reshape(-1), decoder, yolo.Geometry.of(*hw, 64))
                expected = reference.detect(raw, fmt, hw, 64, *settings, names=NAMES)
                same_as_reference(got, expected)
                counts[settings] = len(expected)
                nan_boxes[settings] = sum(np.isnan(e[3]).any() for e in expected)
    # Suppression, the cap and the threshold all took effect.
    assert counts[(0.25, 1.0, 300)] > counts[(0.25, 0.45, 300)] > counts[(0.25, 0.0, 300)] > 1
    assert counts[(0.0, 1.0, 300)] > counts[(0.5, 1.0, 300)] and counts[(0.0, 1.0, 5)] == 5
    # Boxes with a NaN coordinate were found, and no suppression took any (nothing overlaps one).
    assert nan_boxes[(0.0, 0.0, 300)] == nan_boxes[(0.0, 1.0, 300)] > 0


def test_reference_refuses_an_iou_within_float32_rounding_of_the_threshold():
    """OpenCV's suppression compares a float32 overlap; the reference refuses boxes whose IoU
    (here 1/3) is so near the threshold that the rounding would decide, and the decoder agrees
    with it on either side of that band."""
    raw = np.array([[1, 1, 2, 2, 1, 0.9, 0, 0], [2, 1, 2, 2, 1, 0.8, 0, 0]], np.float32)
    for iou_threshold, kept in ((1 / 3, 2), (1 / 3 - 1e-6, 1)):
        expected = reference.detect(raw, "yolov5", (64, 64), 64, 0.25, iou_threshold)
        assert len(expected) == kept
        decoder = yolo.Decoder(yolo.Layout("yolov5", 3), 0.25, iou_threshold, 300, tuple(NAMES))
        same_as_reference(
            yolo.detections(raw.reshape(-1), decoder, yolo.Geometry.of(64, 64, 64)), expected
        )
    with pytest.raises(ValueError, match="within float32 rounding of the IoU threshold"):
        reference.detect(raw, "yolov5", (64, 64), 64, 0.25, 1 / 3 - 1e-9)


def test_layouts_and_numbers_read_as_the_jvm_reads_them():
    assert yolo.resolve_layout([16, 8], "auto") == yolo.Layout("yolov5", 3)
    assert yolo.resolve_layout([7, 8400], "auto") == yolo.Layout("yolov8", 3)
    assert yolo.resolve_layout([-1, 85], "auto") == yolo.Layout("yolov5", 80)
    assert yolo.resolve_layout([84, -1], " YOLOv8 ") == yolo.Layout("yolov8", 80)
    with pytest.raises(ValueError, match=r"per image \[8, 8\]: modelFormat 'auto' cannot tell"):
        yolo.resolve_layout([8, 8], "auto")
    with pytest.raises(ValueError, match="as yolov8 its first dimension must be fixed"):
        yolo.resolve_layout([-1, 85], "yolov8")
    with pytest.raises(ValueError, match=r"\[1, 2, 3\]: it does not have two dimensions"):
        yolo.resolve_layout([1, 2, 3], "auto")
    shown = [0.25, 1.0, 100.0, 1e-5, 0.001, 1.5e7, -0.0, 1 / 3, 9.9e-4, None, math.nan]
    assert [java.java_double(v) for v in shown] == [
        "0.25", "1.0", "100.0", "1.0E-5", "0.001", "1.5E7", "-0.0", "0.3333333333333333",
        "9.9E-4", "null", "NaN",
    ]  # fmt: skip
    assert [java.java_int(v) for v in (2.9, -2.9, math.nan, 1e12, -1e12)] == [
        2,
        -2,
        0,
        2**31 - 1,
        -(2**31),
    ]


# -- comparing the two backends' outputs -----------------------------------------------------------


def same_schema(jvm_df: DataFrame, py_df: DataFrame) -> None:
    assert jvm_df.columns == py_df.columns, (jvm_df.columns, py_df.columns)
    for a, b in zip(jvm_df.schema.fields, py_df.schema.fields, strict=True):
        assert a.dataType == b.dataType, f"{a.name}: jvm {a.dataType!r}, python {b.dataType!r}"
        assert a.nullable == b.nullable, f"{a.name}: nullable {a.nullable} vs {b.nullable}"
        assert a.metadata == b.metadata, a.name


def same_detection(where: str, e: Row | None, g: Row | None) -> None:
    if e is None or g is None:
        assert e is None and g is None, f"{where}: jvm {e}, python {g}"
        return
    assert (g["category"], g["label"]) == (e["category"], e["label"]), where
    assert abs(g["conf"] - e["conf"]) <= TOLERANCE, (where, e["conf"], g["conf"])
    if e["bbox"] is None:
        assert g["bbox"] is None, where
    else:
        np.testing.assert_allclose(g["bbox"], e["bbox"], rtol=0, atol=TOLERANCE, err_msg=where)


def same_detections(where: str, e: list[Row] | None, g: list[Row] | None) -> None:
    if e is None or g is None:
        assert e is None and g is None, f"{where}: jvm {e}, python {g}"
        return
    assert len(g) == len(e), f"{where}: jvm {len(e)} detections, python {len(g)}"
    for i, (a, b) in enumerate(zip(e, g, strict=True)):
        same_detection(f"{where}[{i}]", a, b)


def same_value(where: str, e: Any, g: Any) -> None:
    """Detections (arrays of structs) within the tolerance; crops and everything else exact."""
    if isinstance(e, list) and e and isinstance(e[0], Row) and "conf" in e[0].__fields__:
        same_detections(where, e, g)
    elif isinstance(e, Row) and "conf" in e.__fields__:
        same_detection(where, e, g)
    elif isinstance(e, Row) and e.__fields__[-1:] == ["data"]:  # an image struct
        assert isinstance(g, Row) and g.__fields__ == e.__fields__, where
        for field in e.__fields__[:-1]:
            assert g[field] == e[field], f"{where}.{field}: jvm {e[field]!r}, python {g[field]!r}"
        assert bytes(g["data"]) == bytes(e["data"]), f"{where}: the crops' pixels differ"
    else:
        assert g == e, f"{where}: jvm {e!r}, python {g!r}"


def assert_same(
    jvm_df: DataFrame, py_df: DataFrame, key: Callable[[Row], Any], rows: int
) -> dict[Any, Row]:
    """The two outputs agree: schema, row count, every value (see the module docstring).
    Returns the JVM's rows by `key`."""
    same_schema(jvm_df, py_df)
    jvm_rows, py_rows = jvm_df.collect(), py_df.collect()
    assert len(jvm_rows) == rows, f"the JVM gave {len(jvm_rows)} rows for {rows}"
    assert len(py_rows) == rows, f"the Python backend gave {len(py_rows)} rows for {rows}"
    jvm_by, py_by = {key(r): r for r in jvm_rows}, {key(r): r for r in py_rows}
    assert len(jvm_by) == rows and jvm_by.keys() == py_by.keys(), "keys repeat or differ"
    for k, e in jvm_by.items():
        for name in jvm_df.columns:
            same_value(f"{k}.{name}", e[name], py_by[k][name])
    return jvm_by


def detector(backend: str, model: bytes, **params: Any) -> ObjectDetector:
    stage = ObjectDetector(**params).setBackend(backend)
    assert stage.getBackend() == backend
    return stage.setModelPayload(model)


def both_detect(model: bytes, df: DataFrame, **params: Any) -> tuple[DataFrame, DataFrame]:
    return (
        detector("jvm", model, **params).transform(df),
        detector("python", model, **params).transform(df),
    )


def both_crop(df: DataFrame, **params: Any) -> tuple[DataFrame, DataFrame]:
    jvm, python = (CropDetections(**params).setBackend(b) for b in ("jvm", "python"))
    assert (jvm.getBackend(), python.getBackend()) == ("jvm", "python")
    return jvm.transform(df), python.transform(df)


def by_name(row: Row) -> Any:
    return row["name"]


def by_crop(row: Row) -> Any:
    return (row["name"], row["detectionIndex"])


# -- inputs ----------------------------------------------------------------------------------------


def demo_files() -> dict[str, bytes]:
    """Every other photo of the camera-trap demo's detection part, one turned by its EXIF tag,
    a gray and a transparent PNG, and the bad rows."""
    photos = sorted(p for folder in (DEMO / "images").iterdir() for p in folder.iterdir())
    chosen = {p.name: p.read_bytes() for p in photos[::2]}
    first = next(iter(chosen))
    chosen["rotated.jpg"] = with_exif_orientation(chosen[first], 6)
    chosen["gray.png"] = encode(pattern(96, 72, seed=3)[..., 1], ".png")
    deer = cv2.imdecode(np.frombuffer(chosen[first], np.uint8), cv2.IMREAD_COLOR)
    alpha = np.full(deer.shape[:2], 200, np.uint8)
    chosen["alpha.png"] = encode(np.dstack([deer, alpha]), ".png")
    chosen["truncated.jpg"] = chosen[first][:600]
    chosen["notes.txt"] = b"field notes: camera 7 battery low\n"
    return chosen


BAD_PHOTOS = {
    "truncated.jpg": "truncated JPEG: no end-of-image marker in 600 bytes",
    "notes.txt": "not a decodable image (34 bytes starting 66 69 65 6c): unknown format or "
    "corrupt data",
    "none": "no input image (null)",
}


@pytest.fixture(scope="module")
def demo_model() -> bytes:
    return (DEMO / "detector.onnx").read_bytes()


@pytest.fixture(scope="module")
def photos(spark) -> DataFrame:
    rows = [(name, data) for name, data in demo_files().items()] + [("none", None)]
    return spark.createDataFrame(rows, "name string, content binary")


@pytest.fixture(scope="module")
def structs(photos) -> DataFrame:
    """The photos decoded as they are stored (gray, BGR, BGRA), by the JVM's decoder."""
    decoder = ImageDecoder(inputCol="content", outputCol="image", originCol="name")
    return decoder.setColorMode("unchanged").setBackend("jvm").transform(photos).drop("content")


# -- ObjectDetector --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, params",
    [
        ("bytes", dict(inputCol="content")),
        ("bytes", dict(inputCol="content", reducedDecode=False, miniBatchSize=3)),
        ("structs", dict(inputCol="image", confidenceThreshold=0.2, maxDetections=1)),
    ],
    ids=["bytes-reduced", "bytes-full-size", "structs"],
)
def test_demo_detector_gives_the_jvm_detections(photos, structs, demo_model, kind, params):
    df = photos if kind == "bytes" else structs
    jvm_df, py_df = both_detect(demo_model, df, **params)
    assert py_df.columns == [*df.columns, "detections", "detectionError"]
    assert py_df.schema["detections"].dataType == T.ArrayType(DETECTION)
    rows = assert_same(jvm_df, py_df, by_name, df.count())
    for name, row in rows.items():
        want = BAD_PHOTOS.get(name) if kind == "bytes" else None
        if kind == "structs" and name in BAD_PHOTOS:
            want = "no input image (null)"  # the decoder left a null struct
        assert row["detectionError"] == want, name
        assert (row["detections"] is None) == (want is not None), name
        if name.startswith(("deer", "fox")) or name == "rotated.jpg":
            assert row["detections"], f"{name}: the demo detector finds its animal"


def scene(fmt: str, seed: int, boxes: int = 16) -> np.ndarray:
    """What the echo detector reads: [boxes, 8] (yolov5) or [7, boxes] (yolov8) pixels holding
    overlapping boxes of the three classes, scores on a coarse grid."""
    rng = np.random.default_rng(seed)
    centers = rng.integers(60, 200, (3, 2))
    rows = []
    for k in range(boxes):
        cx, cy = centers[k % 3] + rng.integers(-6, 7, 2)
        w, h = rng.integers(30, 90, 2)
        objectness = [rng.integers(4, 16) * 16] if fmt == "yolov5" else []
        rows.append([cx, cy, w, h, *objectness, *(rng.integers(0, 16, 3) * 16)])
    pixels = np.array(rows, np.uint8)
    return pixels if fmt == "yolov5" else pixels.T.copy()


def scene_photo(pixels: np.ndarray, size: int = 32) -> bytes:
    """A PNG whose red channel's top-left holds `pixels`."""
    image = np.zeros((size, size, 3), np.uint8)
    image[: pixels.shape[0], : pixels.shape[1], 2] = pixels
    return encode(image, ".png")


@pytest.mark.parametrize("fmt", ["yolov5", "yolov8"])
def test_yolov5_and_yolov8_layouts_suppress_per_class_as_the_jvm(spark, fmt):
    df = spark.createDataFrame(
        [(f"s{seed}", scene_photo(scene(fmt, seed))) for seed in range(6)], ["name", "content"]
    )
    model = onnx_models.yolo_echo(layout=fmt)
    params = dict(inputCol="content", confidenceThreshold=0.25, miniBatchSize=4)
    if fmt == "yolov8":
        params.update(modelFormat=" YOLOv8", classNames=["deer", "fox", "boar"])
    rows = assert_same(*both_detect(model, df, **params), by_name, 6)
    kept = sum(len(r["detections"]) for r in rows.values())
    assert all(r["detectionError"] is None for r in rows.values()) and kept > 6
    unsuppressed = detector("python", model, iouThreshold=1.0, **params).transform(df).collect()
    assert sum(len(r["detections"]) for r in unsuppressed) > kept  # suppression was exercised
    for name, row in rows.items():
        labels = {d["label"] for d in row["detections"]}
        assert labels <= set(params.get("classNames", NAMES)), name


# Boxes in the 64 x 64 square (yolov5: cx, cy, w, h, objectness, 3 class scores).
EDGES = np.array(
    [
        [20, 20, 8, 8, 1.0, 0.5, 0.0, 0.0],  # conf 0.5: not over a threshold of 0.5
        [20, 40, 8, 8, 0.5, 0.0, 1.0, 0.0],  # objectness 0.5: not over it either
        [40, 20, 8, 8, 1.0, 0.75, 0.75, 0.0],  # a tie between classes: the first wins
        [40, 20, 8, 8, 1.0, 0.75, 0.0, 0.0],  # the same box, as confident: suppressed
        [40, 20, 8, 8, 1.0, 0.0, 0.75, 0.0],  # the same box, another class: kept
        [50, 50, 4, 4, 1.0, 0.0, 0.0, 0.875],  # a box ...
        [49, 50, 2, 4, 1.0, 0.0, 0.0, 0.8],  # ... half of which this one is: IoU 0.5, kept
        [10, 50, 6, 6, 1.0, 0.0, 0.0, 0.75],  # as confident as box 2, later: after it
        [70, 70, 0, 6, 1.0, 0.0, 0.0, 0.625],  # outside the photo: an empty box
        [32, 32, 60, 60, 1.0, 0.5000001, 0.0, 0.0],  # just over the threshold, huge
    ],
    np.float32,
)


def test_thresholds_ties_and_suppression_edges_are_the_jvm_s(spark):
    photo = pattern(48, 64, seed=5)
    df = spark.createDataFrame([("edges", encode(photo, ".png"))], ["name", "content"])
    model = onnx_models.yolo_constant(EDGES, size="S")
    params = dict(inputCol="content", imageSize=64, confidenceThreshold=0.5, iouThreshold=0.5)
    jvm_df, py_df = both_detect(model, df, **params)
    found = assert_same(jvm_df, py_df, by_name, 1)["edges"]["detections"]
    # The order the JVM keeps them in, from an independent reading of its rules.
    assert [(d["category"], d["conf"]) for d in found] == [
        ("3", 0.875),
        ("3", 0.800000011920929),
        ("1", 0.75),
        ("2", 0.75),
        ("3", 0.75),
        ("3", 0.625),
        ("1", float(np.float32(0.5000001))),
    ]
    same_as_reference(
        [d.asDict() for d in found], reference.detect(EDGES, "yolov5", (48, 64), 64, 0.5, 0.5)
    )
    # At most maxDetections, the most confident.
    capped = both_detect(model, df, maxDetections=2, **params)
    assert len(assert_same(*capped, by_name, 1)["edges"]["detections"]) == 2
    # A crop threshold equal to a confidence keeps it; an empty box is a row error.
    crops = both_crop(jvm_df, inputCol="content", confidenceThreshold=0.75)
    chosen = assert_same(*crops, by_crop, 5)
    assert sorted(chosen) == [("edges", i) for i in range(5)]
    assert chosen[("edges", 4)]["detection"]["conf"] == 0.75
    assert all(r["cropError"] is None and r["crop"] for r in chosen.values())
    every = assert_same(*both_crop(jvm_df, inputCol="content", confidenceThreshold=0.0), by_crop, 7)
    empty = "the box [1.0, 1.0, 0.0, 0.0] is empty in a 64x48 image"
    assert every[("edges", 5)]["cropError"] == empty and every[("edges", 5)]["crop"] is None
    assert every[("edges", 6)]["crop"]["height"] == 48  # the huge box, clipped to the photo


# -- CropDetections --------------------------------------------------------------------------------


def det(conf: float | None, bbox: list[float | None] | None, category: str = "1") -> dict:
    return {"category": category, "label": "x", "conf": conf, "bbox": bbox, "extra": 7}


HAND_MADE = [
    # square crops of boxes at the photo's edges (moved inside), and of a box wider than it
    ("edges.png", [det(0.9, [0.9, 0.05, 0.08, 0.3]), det(0.8, [-0.2, 0.7, 0.5, 0.4], "2"),
                   det(0.7, [0.1, 0.1, 1.5, 0.2]), det(0.1, [0.1, 0.1, 0.2, 0.2])]),
    # bad boxes: too short, null, empty twice (the second shown in Java's notation)
    ("bad boxes.png", [det(0.9, [0.1, 0.2, 0.3]), det(0.9, None), det(0.9, [0.5, 0.5, 0.0, 0.1]),
                       det(0.9, [1e-5, 2.5e-4, 1e-4, 0.4])]),
    ("null image", [det(0.9, [0.1, 0.1, 0.5, 0.5])]),
    ("undecodable", [det(0.9, [0.1, 0.1, 0.5, 0.5]), det(0.95, [0.2, 0.1, 0.5, 0.5], "2")]),
    ("no detections", []),
    ("null detections", None),
    ("under the threshold", [det(0.05, [0.1, 0.1, 0.5, 0.5])]),
]  # fmt: skip


UNDECODABLE = (
    "not a decodable image (11 bytes starting 6e 6f 74 20): unknown format or corrupt data"
)


def hand_made_df(spark, rows: list[tuple[str, Any]]) -> DataFrame:
    content = {
        "edges.png": encode(pattern(40, 60, seed=6), ".png"),
        "bad boxes.png": encode(pattern(30, 20, seed=7), ".png"),
        "undecodable": b"not a photo",
        "no detections": encode(pattern(10, 10), ".png"),
        "under the threshold": encode(pattern(10, 10), ".png"),
    }
    # Detections as a user may hold them: every field nullable, and one more field.
    detection = T.StructType(
        [
            T.StructField("category", T.StringType()),
            T.StructField("label", T.StringType()),
            T.StructField("conf", T.DoubleType()),
            T.StructField("bbox", T.ArrayType(T.DoubleType())),
            T.StructField("extra", T.IntegerType()),
        ]
    )
    schema = T.StructType(
        [
            T.StructField("name", T.StringType()),
            T.StructField("content", T.BinaryType()),
            T.StructField("detections", T.ArrayType(detection)),
        ]
    )
    return spark.createDataFrame([(n, content.get(n), d) for n, d in rows], schema)


@pytest.fixture(scope="module")
def hand_made(spark) -> DataFrame:
    return hand_made_df(spark, HAND_MADE)


@pytest.mark.parametrize(
    "params, count",
    [
        (dict(), 10),
        (dict(square=True, keepUncropped=True), 13),
        (dict(categories=["2"], keepUncropped=True, confidenceThreshold=0.5), 7),
    ],
    ids=["default", "square-keep-uncropped", "categories"],
)
def test_hand_made_detections_give_the_jvm_crops_and_errors(hand_made, params, count):
    crops = assert_same(*both_crop(hand_made, inputCol="content", **params), by_crop, count)
    if params.get("categories"):
        assert sorted(k for k in crops if k[1] is not None) == [
            ("edges.png", 1),
            ("undecodable", 1),
        ]
        return
    errors = {k: r["cropError"] for k, r in crops.items() if r["cropError"]}
    assert errors == {
        ("bad boxes.png", 0): "a bbox has 4 values, not Some(3)",
        ("bad boxes.png", 1): "a bbox has 4 values, not None",
        ("bad boxes.png", 2): "the box [0.5, 0.5, 0.0, 0.1] is empty in a 20x30 image",
        ("bad boxes.png", 3): "the box [1.0E-5, 2.5E-4, 1.0E-4, 0.4] is empty in a 20x30 image",
        ("null image", 0): "no input image (null)",
        ("undecodable", 0): UNDECODABLE,
        ("undecodable", 1): UNDECODABLE,
    }
    edge = crops[("edges.png", 0)]
    assert edge["detection"]["extra"] == 7 and edge["crop"]["origin"] is None
    if params.get("square"):
        sides = [crops[("edges.png", i)]["crop"] for i in range(3)]
        assert all(c["height"] == c["width"] for c in sides)
        assert crops[("no detections", None)]["crop"] is None


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_null_values_in_detections_are_row_errors_or_not_chosen(spark, backend):
    """Bad rows never fail a job, on either backend: a null detection or conf is not chosen, and
    a bbox holding a null is its crop's row error."""
    rows = [
        ("bad boxes.png", [det(None, [0.1, 0.1, 0.5, 0.5]), None, det(0.5, [None, 0.2, 0.5, 0.5]),
                           det(0.5, [0.1, 0.1, 0.5, 0.5]), det(0.5, None)]),
    ]  # fmt: skip
    stage = CropDetections(inputCol="content", confidenceThreshold=0.0).setBackend(backend)
    got = {r["detectionIndex"]: r for r in stage.transform(hand_made_df(spark, rows)).collect()}
    assert sorted(got) == [2, 3, 4]
    assert got[2]["cropError"] == "the box [null, 0.2, 0.5, 0.5] has a null value"
    assert got[3]["cropError"] is None
    assert (got[3]["crop"]["height"], got[3]["crop"]["width"]) == (15, 10)
    assert got[4]["cropError"] == "a bbox has 4 values, not None"


def test_detections_of_photos_and_structs_give_the_jvm_crops(photos, structs, demo_model):
    """Crops of the JVM's detections of the demo photos (bytes and structs with their origin),
    so that both backends crop the same boxes."""
    for df, column in ((photos, "content"), (structs, "image")):
        found = detector("jvm", demo_model, inputCol=column, confidenceThreshold=0.1)
        detected = found.transform(df)
        for params in (dict(), dict(square=True, keepUncropped=True, confidenceThreshold=0.3)):
            jvm_df, py_df = both_crop(detected, inputCol=column, **params)
            rows = assert_same(jvm_df, py_df, by_crop, jvm_df.count())
            crops = [r for r in rows.values() if r["crop"] is not None]
            assert len(crops) >= 10
            if column == "image":
                assert all(r["crop"]["origin"] == r["name"] for r in crops)


def test_python_detector_then_python_crops_equal_the_jvm_pipeline(photos, demo_model):
    """The Python stages chained (one Arrow UDF) against the JVM's pair."""
    params = dict(inputCol="content", confidenceThreshold=0.1)
    crop_params = dict(inputCol="content", square=True, keepUncropped=True)
    outputs = [
        CropDetections(**crop_params)
        .setBackend(backend)
        .transform(detector(backend, demo_model, **params).transform(photos))
        for backend in ("jvm", "python")
    ]
    rows = assert_same(*outputs, by_crop, outputs[0].count())
    assert rows[("none", None)]["detectionError"] == "no input image (null)"


# -- checks before any job, params, saving ---------------------------------------------------------


def error_of(make: Callable[[], Any]) -> str:
    with pytest.raises(Exception) as caught:  # noqa: PT011 (the JVM's and Python's types differ)
        make()
    text = str(caught.value).splitlines()[0]
    return re.sub(r"(ObjectDetector|CropDetections|ONNXModel)_[0-9a-f]+", r"\1_uid", text)


def test_misconfigured_stages_fail_with_the_jvm_s_words(spark, demo_model):
    df = spark.createDataFrame([("a", b"", [])], "name string, content binary, found array<int>")
    echo = onnx_models.yolo_echo()
    square = onnx_models.yolo_constant(np.zeros((8, 8), np.float32))
    cases: list[tuple[bytes | None, dict[str, Any]]] = [
        (echo, dict(inputCol="content", classNames=["animal", "person"])),
        (square, dict(inputCol="content")),
        (echo, dict(inputCol="content", imageSize=640)),
        (echo, dict(inputCol="name")),
        (echo, dict(inputCol="missing")),
        (echo, dict(inputCol="content", outputCol="name")),
        (echo, dict(inputCol="content", outputCol="x", errorCol="x")),
        (onnx_models.small_cnn(), dict(inputCol="content")),
        (onnx_models.two_in_two_out(), dict(inputCol="content")),
    ]
    for model, params in cases:
        jvm, python = (
            ObjectDetector(**params).setBackend(b).setModelPayload(model) for b in ("jvm", "python")
        )
        expected = error_of(lambda s=jvm: s.transform(df))
        assert error_of(lambda s=python: s.transform(df)) == expected, params
        assert "ObjectDetector_uid: " in expected
    for params in (
        dict(inputCol="content", detectionsCol="found"),
        dict(inputCol="content", detectionsCol="name"),
        dict(inputCol="content", outputCol="name", detectionsCol="found"),
    ):
        jvm, python = (CropDetections(**params).setBackend(b) for b in ("jvm", "python"))
        expected = error_of(lambda s=jvm: s.transform(df))
        assert error_of(lambda s=python: s.transform(df)) == expected, params
    for make in (
        lambda b: ObjectDetector().setBackend(b).setConfidenceThreshold(1.5),
        lambda b: ObjectDetector().setBackend(b).setModelFormat("yolov7"),
        lambda b: ObjectDetector().setBackend(b).setClassNames([]),
        lambda b: CropDetections().setBackend(b).setCategories(["1", ""]),
    ):
        assert error_of(lambda m=make: m("python")) == error_of(lambda m=make: m("jvm"))


def test_saved_on_either_backend_loads_and_detects_on_the_other(spark, tmp_path, demo_model):
    df = spark.createDataFrame(
        [(f"s{seed}", scene_photo(scene("yolov8", seed))) for seed in range(3)],
        ["name", "content"],
    )
    model = onnx_models.yolo_echo(layout="yolov8")
    params = dict(inputCol="content", confidenceThreshold=0.3, classNames=["a", "b", "c"])
    expected = detector("jvm", model, **params).transform(df)
    python = detector("python", model, **params)
    python.write().save(str(tmp_path / "python"))
    detector("jvm", model, **params).save(str(tmp_path / "jvm"))
    CropDetections(square=True).setBackend("python").write().save(str(tmp_path / "crops"))
    on_jvm = ObjectDetector.load(str(tmp_path / "python"))
    assert on_jvm.getBackend() == "jvm" and on_jvm.uid == python.uid
    assert_same(expected, on_jvm.transform(df), by_name, 3)
    assert CropDetections.load(str(tmp_path / "crops")).getSquare() is True
    set_backend("python")
    try:
        on_python = ObjectDetector.load(str(tmp_path / "jvm"))
        crops = CropDetections.load(str(tmp_path / "crops"))
        save_pipeline(PipelineModel([on_python]), str(tmp_path / "pipeline"))
        in_pipeline = load_pipeline(str(tmp_path / "pipeline"))
    finally:
        set_backend(None)
    assert on_python.getBackend() == "python" and on_python.getClassNames() == ["a", "b", "c"]
    assert on_python.getModelPayload() == model and crops.getBackend() == "python"
    rows = assert_same(expected, on_python.transform(df), by_name, 3)
    assert sum(len(r["detections"]) for r in rows.values()) > 0
    # A pipeline saved on Python loads on Python (mmlspark) and on the JVM (Spark's reader).
    assert in_pipeline.stages[0].getBackend() == "python"
    assert_same(expected, in_pipeline.transform(df), by_name, 3)
    assert_same(expected, PipelineModel.load(str(tmp_path / "pipeline")).transform(df), by_name, 3)


# -- Spark Connect without the jar -----------------------------------------------------------------


def test_connect_without_the_jar_detects_and_crops_like_the_jvm(
    spark, jarless_connect, demo_model, tmp_path
):
    from conftest import connect_mode

    model_file = tmp_path / "detector.onnx"
    model_file.write_bytes(demo_model)
    rows = [(name, data) for name, data in demo_files().items()] + [("none", None)]

    def run(session: Any) -> list[Row]:
        df = session.createDataFrame(rows, "name string, content binary")
        found = ObjectDetector(inputCol="content", modelLocation=str(model_file))
        assert found.getBackend() == ("jvm" if session is spark else "python")
        crops = CropDetections(inputCol="content", square=True, keepUncropped=True)
        return crops.transform(found.transform(df)).drop("content").collect()

    expected = {by_crop(r): r for r in run(spark)}
    with connect_mode():
        got = {by_crop(r): r for r in run(jarless_connect)}
    assert got.keys() == expected.keys() and len(got) >= len(rows)
    assert sum(r["crop"] is not None for r in got.values()) >= 10
    for key, e in expected.items():
        for name in e.__fields__:
            same_value(f"{key}.{name}", e[name], got[key][name])
    assert expected[("notes.txt", None)]["detectionError"] == BAD_PHOTOS["notes.txt"]
