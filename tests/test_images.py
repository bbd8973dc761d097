"""Reading and transforming images, checked against opencv-python 4.9 (the JVM's OpenCV version).

Tests taking `session` run on a classic and on a Spark Connect session from one body. The others
are classic only: a folder's listing differs by design over Connect (read_images reads it with
Spark's binaryFile source, which skips zero-length files: see its docstring), the large image
would cross the Connect channel (48 MB), and the tensor and stage tests check the JVM stages
that the Connect scenarios of test_connect.py run end to end.
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from image_fixtures import BAD, encode, pattern, write_all
from pyspark.ml import Pipeline, PipelineModel

from mmlspark.image import (
    ImageDecoder,
    UnrollBinaryImage,
    UnrollImage,
    read_images,
    to_ndarray,
)
from mmlspark.opencv import ImageSetAugmenter, ImageTransformer


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    path = tmp_path_factory.mktemp("photos")
    return path, write_all(path)


@pytest.fixture(scope="module")
def images(spark, folder):
    return read_images(spark, str(folder[0]), pathGlobFilter="*[!e].jpg")


def _by_name(rows) -> dict:
    return {Path(r["path"]).name: r for r in rows}


@pytest.mark.lines
def test_every_file_gives_one_row_and_each_bad_file_says_why(spark, folder):
    path, files = folder
    df = read_images(spark, str(path)).drop("image")  # the large image stays on the JVM
    rows = _by_name(df.collect())
    assert set(rows) == set(files)
    for name, reason in BAD.items():
        assert reason in rows[name]["error"], (name, rows[name]["error"])
    assert all(rows[n]["error"] is None for n in files if n not in BAD)
    assert read_images(spark, str(path), dropInvalid=True).count() == len(files) - len(BAD)


@pytest.mark.parametrize(
    "name",
    [
        "color.jpg",
        "color.png",
        "color.bmp",
        "color.tiff",
        "color.webp",
        "gray.png",
        "cmyk.jpg",
        "rotated6.jpg",
        "rotated3.jpg",
        "deep16.png",
        "alpha.png",
    ],
)
@pytest.mark.lines
def test_decoded_pixels_equal_opencv_python(session, folder, name):
    path, files = folder
    row = read_images(session, str(path / name)).collect()[0]
    assert row["error"] is None
    expected = cv2.imdecode(np.frombuffer(files[name], np.uint8), cv2.IMREAD_COLOR)
    got = to_ndarray(row["image"])
    assert row["image"]["mode"] == 16 and got.dtype == np.uint8
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "name,mode,channels", [("deep16.png", 18, 3), ("alpha.png", 24, 4), ("gray.png", 0, 1)]
)
def test_unchanged_keeps_depth_and_alpha(session, folder, name, mode, channels):
    path, files = folder
    row = read_images(session, str(path / name), colorMode="unchanged").collect()[0]
    expected = cv2.imdecode(np.frombuffer(files[name], np.uint8), cv2.IMREAD_UNCHANGED)
    got = to_ndarray(row["image"])
    assert row["image"]["mode"] == mode and row["image"]["nChannels"] == channels
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_exif_orientation_applies_unless_switched_off(session, folder):
    path, files = folder
    on = read_images(session, str(path / "rotated6.jpg")).collect()[0]["image"]
    off = read_images(session, str(path / "rotated6.jpg"), applyOrientation=False).collect()[0][
        "image"
    ]
    assert (on["height"], on["width"]) == (64, 48)
    assert (off["height"], off["width"]) == (48, 64)
    raw = cv2.imdecode(
        np.frombuffer(files["rotated6.jpg"], np.uint8),
        cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION,
    )
    np.testing.assert_array_equal(to_ndarray(off), raw)
    np.testing.assert_array_equal(to_ndarray(on), cv2.rotate(raw, cv2.ROTATE_90_CLOCKWISE))


@pytest.mark.lines
def test_large_image_full_and_reduced(spark, folder):
    path, files = folder
    df = read_images(spark, str(path / "large.jpg"))
    assert df.selectExpr("image.height", "image.width", "length(image.data)").first()[:] == (
        6000,
        8000,
        6000 * 8000 * 3,
    )
    small = read_images(spark, str(path / "large.jpg"), reduceFactor=8).collect()[0]["image"]
    expected = cv2.imdecode(np.frombuffer(files["large.jpg"], np.uint8), cv2.IMREAD_REDUCED_COLOR_8)
    np.testing.assert_array_equal(to_ndarray(small), expected)


def _resized_tensor(data: bytes, mode: int) -> np.ndarray:
    """opencv-python's decode in `mode`, resized to 224 x 224, as an RGB CHW float tensor."""
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), mode | cv2.IMREAD_IGNORE_ORIENTATION)
    return cv2.resize(decoded, (224, 224))[:, :, ::-1].astype(np.float32).transpose(2, 0, 1)


def _tensor_of(stage: ImageTransformer, df) -> np.ndarray:
    row = stage.transform(df).select("tensor", "transformError").first()
    assert row["transformError"] is None
    return np.array(row["tensor"], np.float32).reshape(3, 224, 224)


@pytest.mark.lines
def test_encoded_bytes_decode_in_the_same_pass_at_the_reduced_scale(session, tmp_path):
    """binaryFile bytes straight into ImageTransformer: with reducedDecode (the default) a 7.7 MP
    JPEG is decoded at 1/8, as OpenCV's reduced mode does it; with it off, at full size."""
    data = encode(pattern(2400, 3200, seed=9), ".jpg")
    (tmp_path / "photo.jpg").write_bytes(data)
    df = session.read.format("binaryFile").load(str(tmp_path / "photo.jpg"))
    for reduced, mode in ((True, cv2.IMREAD_REDUCED_COLOR_8), (False, cv2.IMREAD_COLOR)):
        stage = ImageTransformer(
            inputCol="content", outputCol="tensor", toTensor=True, reducedDecode=reduced
        ).resize(224, 224)
        np.testing.assert_array_equal(_tensor_of(stage, df), _resized_tensor(data, mode))


def _reference_chain(img: np.ndarray) -> np.ndarray:
    """resize(shorter side 256) -> centerCrop(224) -> RGB -> normalize -> CHW, in numpy/cv2."""
    h, w = img.shape[:2]
    scale = 256 / min(h, w)
    nh, nw = (256, math.floor(w * scale + 0.5)) if h <= w else (math.floor(h * scale + 0.5), 256)
    resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    y0, x0 = (nh - 224) // 2, (nw - 224) // 2
    rgb = resized[y0 : y0 + 224, x0 : x0 + 224, ::-1].astype(np.float32)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return ((rgb * np.float32(1 / 255) - mean) / std).transpose(2, 0, 1)


@pytest.mark.lines
def test_model_ready_tensor_equals_numpy_reference(spark, tmp_path):
    img = pattern(480, 640, seed=5)
    (tmp_path / "a.png").write_bytes(encode(img, ".png"))
    portrait = pattern(500, 300, seed=6)
    (tmp_path / "b.png").write_bytes(encode(portrait, ".png"))
    tf = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .resize(size=256, keepAspectRatio=True)
        .centerCrop(224, 224)
        .normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], colorScaleFactor=1 / 255)
    )
    out = tf.transform(read_images(spark, str(tmp_path)))
    assert out.schema["tensor"].metadata["tensorShape"] == [3, 224, 224]
    rows = _by_name(out.collect())
    for name, source in (("a.png", img), ("b.png", portrait)):
        got = np.array(rows[name]["tensor"], np.float32).reshape(3, 224, 224)
        np.testing.assert_array_equal(got, _reference_chain(source))  # bit-exact


OPS = [
    ("resize", lambda t: t.resize(20, 30), lambda a: cv2.resize(a, (30, 20))),
    (
        "resize-nearest",
        lambda t: t.resize(17, 9, interpolation=cv2.INTER_NEAREST),
        lambda a: cv2.resize(a, (9, 17), interpolation=cv2.INTER_NEAREST),
    ),
    ("crop", lambda t: t.crop(5, 7, 20, 25), lambda a: a[7:27, 5:30]),
    ("centerCrop", lambda t: t.centerCrop(21, 33), lambda a: a[13:34, 15:48]),
    ("rgb", lambda t: t.colorFormat("RGB"), lambda a: cv2.cvtColor(a, cv2.COLOR_BGR2RGB)),
    ("gray", lambda t: t.colorFormat("GRAY"), lambda a: cv2.cvtColor(a, cv2.COLOR_BGR2GRAY)),
    ("flip-lr", lambda t: t.flip(1), lambda a: cv2.flip(a, 1)),
    ("flip-ud", lambda t: t.flip(0), lambda a: cv2.flip(a, 0)),
    ("flip-both", lambda t: t.flip(-1), lambda a: cv2.flip(a, -1)),
    ("blur", lambda t: t.blur(5, 3), lambda a: cv2.blur(a, (3, 5))),
    (
        "threshold",
        lambda t: t.threshold(100, 200, cv2.THRESH_BINARY),
        lambda a: cv2.threshold(a, 100, 200, cv2.THRESH_BINARY)[1],
    ),
    (
        "threshold-trunc",
        lambda t: t.threshold(90.5, 255, cv2.THRESH_TRUNC),
        lambda a: cv2.threshold(a, 90.5, 255, cv2.THRESH_TRUNC)[1],
    ),
    ("gaussian", lambda t: t.gaussianKernel(5, 1.5), lambda a: cv2.GaussianBlur(a, (5, 5), 1.5)),
    (
        "normalize",
        # A normalized image (toTensor=False), not the tensor normalize gives by default.
        lambda t: t.setToTensor(False).normalize([10.0, 20.0, 30.0], [2.0, 4.0, 8.0], 1.0),
        lambda a: (a.astype(np.float32) - np.float32([30, 20, 10])) / np.float32([8, 4, 2]),
    ),
]


# The other Spark lines run a representative subset (one of each kind of operation).
ON_EVERY_LINE = {"resize", "crop", "gray", "flip-lr", "threshold", "gaussian", "normalize"}


@pytest.mark.parametrize(
    "name,build,reference",
    [pytest.param(*o, marks=[pytest.mark.lines] if o[0] in ON_EVERY_LINE else []) for o in OPS],
    ids=[o[0] for o in OPS],
)
def test_each_operation_equals_opencv_python(spark, tmp_path, name, build, reference):
    img = pattern(47, 63, seed=11)
    (tmp_path / "x.png").write_bytes(encode(img, ".png"))
    out = build(ImageTransformer()).transform(read_images(spark, str(tmp_path))).collect()[0]
    assert out["transformError"] is None
    expected = reference(img)
    got = to_ndarray(out["transformed"])
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_bgr_tensor_and_gray_tensor(spark, tmp_path):
    img = pattern(10, 12, seed=2)
    (tmp_path / "x.png").write_bytes(encode(img, ".png"))
    df = read_images(spark, str(tmp_path))
    bgr = ImageTransformer(toTensor=True, tensorChannelOrder="BGR").transform(df).first()
    np.testing.assert_array_equal(
        np.array(bgr["transformed"]).reshape(3, 10, 12), img.transpose(2, 0, 1).astype(np.float32)
    )
    gray_tf = ImageTransformer(toTensor=True).colorFormat("GRAY")
    gray = gray_tf.transform(df)
    assert gray.schema["transformed"].metadata["tensorShape"] == [1, -1, -1]  # size from input
    np.testing.assert_array_equal(
        np.array(gray.first()["transformed"]).reshape(10, 12),
        cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(np.float32),
    )


def test_failing_rows_keep_their_row_with_an_error(spark, folder):
    path, _ = folder
    df = read_images(spark, str(path), pathGlobFilter="*.png")
    out = ImageTransformer().crop(0, 0, 45, 45).transform(df).collect()
    rows = _by_name(out)
    assert len(rows) == 4
    assert "outside" in rows["gray.png"]["transformError"]  # 40x30 is too small
    assert rows["color.png"]["transformError"] is None


def test_unroll_augment_and_decode_stages(spark, tmp_path):
    img = pattern(6, 5, seed=4)
    (tmp_path / "x.png").write_bytes(encode(img, ".png"))
    df = read_images(spark, str(tmp_path))
    vec = UnrollImage().transform(df).first()["unrolled"].toArray()
    np.testing.assert_array_equal(vec, img.transpose(2, 0, 1).ravel().astype(float))
    files = spark.read.format("binaryFile").load(str(tmp_path))
    vec2 = UnrollBinaryImage(height=3, width=4).transform(files).first()["unrolled"].toArray()
    np.testing.assert_array_equal(vec2, cv2.resize(img, (4, 3)).transpose(2, 0, 1).ravel())
    augmented = ImageSetAugmenter(flipUpDown=True).transform(df).collect()
    got = sorted(to_ndarray(r["augmented"]).tobytes() for r in augmented)
    assert got == sorted(a.tobytes() for a in (img, cv2.flip(img, 1), cv2.flip(img, 0)))
    decoded = ImageDecoder(originCol="path").transform(files).first()
    np.testing.assert_array_equal(to_ndarray(decoded["image"]), img)


def test_image_pipeline_saves_and_loads(spark, tmp_path, folder):
    path, _ = folder
    df = read_images(spark, str(path), pathGlobFilter="color.*")
    pipeline = Pipeline(
        stages=[
            ImageTransformer(toTensor=True).resize(32, 32).normalize([0.5], [0.25], 1 / 255),
            UnrollImage(inputCol="image", outputCol="vector"),
        ]
    )
    model = pipeline.fit(df)
    model.save(str(tmp_path / "model"))
    loaded = PipelineModel.load(str(tmp_path / "model"))
    assert loaded.stages[0].getOps() == model.stages[0].getOps()
    assert sorted(map(str, loaded.transform(df).collect())) == sorted(
        map(str, model.transform(df).collect())
    )


def test_invalid_operation_fails_at_set_time(spark):
    with pytest.raises(ValueError, match="centerCrop"):
        ImageTransformer().centerCrop(0, 10)
    with pytest.raises(ValueError, match="colorFormat"):
        ImageTransformer().colorFormat("HSV")
