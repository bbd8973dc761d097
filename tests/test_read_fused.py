"""read_images -> ImageTransformer decodes each photo once, at the scale the first resize needs.

With ``reducedDecode`` (the default), an ImageTransformer on read_images' full-size ``image``
decodes each file again at the smallest JPEG scale that still covers its first resize, as it does
on encoded bytes: the same values as ``binaryFile`` -> ImageTransformer, on either backend, cached
or not. On read_images' own output (JVM) the transformer reads the files itself and ``image`` is
left to be computed only where it is read, through ONNXModel too: Spark then runs one decode per
photo, at 1/8 of a 12 MP photo's size.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
import onnx_models
import pytest

from mmlspark.image import read_images
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer

SIZE = 224


def _photo(height: int, width: int, seed: int) -> np.ndarray:
    """A photo-like picture: a smooth random texture with fine noise, so that it compresses like
    a photo."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (height // 25, width // 25, 3), dtype=np.uint8)
    smooth = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC).astype(np.int16)
    noisy = smooth + rng.integers(-6, 7, (height, width, 3), dtype=np.int16)
    return np.clip(noisy, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fused_read")
    ok, jpeg = cv2.imencode(".jpg", _photo(3000, 4000, 1), [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    (folder / "camera.jpg").write_bytes(jpeg.tobytes())  # 12 MP, as camera traps take them
    ok, jpeg = cv2.imencode(".jpg", _photo(900, 1200, 2))
    (folder / "second.jpg").write_bytes(jpeg.tobytes())
    ok, png = cv2.imencode(".png", _photo(150, 200, 3))
    (folder / "small.png").write_bytes(png.tobytes())
    (folder / "notes.jpg").write_bytes(b"not a photo")
    (folder / "empty.jpg").write_bytes(b"")
    return folder


def _transformer(**kwargs) -> ImageTransformer:
    return (
        ImageTransformer(outputCol="tensor", toTensor=True, **kwargs)
        .resize(height=SIZE, width=SIZE)
        .normalize(mean=[0.5, 0.4, 0.3], std=[0.2, 0.25, 0.3], colorScaleFactor=1 / 255)
    )


def _by_name(df, *columns):
    return {r["path"].rsplit("/", 1)[-1]: tuple(r[c] for c in columns) for r in df.collect()}


def _bytes_reference(spark, folder, **kwargs):
    """binaryFile -> ImageTransformer on the bytes (decoded in the same pass)."""
    files = spark.read.format("binaryFile").load(str(folder))
    out = _transformer(inputCol="content", **kwargs).transform(files)
    return _by_name(out, "tensor")


def _reduced_by_opencv(path: str) -> np.ndarray:
    """The 12 MP photo decoded at 1/8 by OpenCV and resized: the tensor's pixels, as HWC BGR."""
    reduced = cv2.imread(path, cv2.IMREAD_REDUCED_COLOR_8 | cv2.IMREAD_IGNORE_ORIENTATION)
    assert reduced.shape == (375, 500, 3)
    return cv2.resize(reduced, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)


def _pixels_of(tensor) -> np.ndarray:
    """A normalized RGB CHW tensor back to 8-bit BGR HWC pixels."""
    chw = np.asarray(tensor, np.float32).reshape(3, SIZE, SIZE)
    mean, std = np.array([0.5, 0.4, 0.3]), np.array([0.2, 0.25, 0.3])
    rgb = (chw * std[:, None, None] + mean[:, None, None]) * 255
    return np.rint(rgb.transpose(1, 2, 0)[..., ::-1]).astype(np.int32)


@pytest.mark.lines
@pytest.mark.parametrize("backend", ["jvm", "python"])
@pytest.mark.parametrize("cached", [False, True], ids=["as-read", "cached"])
def test_read_images_then_a_resize_decodes_at_the_resize_s_scale(spark, photos, backend, cached):
    read = read_images(spark, str(photos), backend=backend)
    if cached:
        read = read.cache()
    try:
        out = _transformer(inputCol="image").setBackend(backend).transform(read)
        got = _by_name(out, "tensor", "error", "transformError")
    finally:
        read.unpersist()
    expected = _bytes_reference(spark, photos)
    errors = _by_name(read_images(spark, str(photos), backend=backend), "error")
    assert sorted(got) == sorted(errors)
    # (Spark's binaryFile source, which lists the files on the Python backend, skips empty ones)
    assert {"camera.jpg", "notes.jpg", "second.jpg", "small.png"} <= set(got)
    for name, (tensor, error, transform_error) in got.items():
        assert error == errors[name][0], name  # the read's own error
        if error is not None:
            assert tensor is None and transform_error == "no input image (null)", name
            continue
        assert transform_error is None, name
        np.testing.assert_array_equal(np.asarray(tensor), np.asarray(expected[name][0]), name)
    # 1/8 of 4000x3000 still covers 224x224: the tensor is OpenCV's reduced decode, resized.
    pixels = _pixels_of(got["camera.jpg"][0])
    assert np.abs(pixels - _reduced_by_opencv(str(photos / "camera.jpg"))).max() <= 1


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_without_reduced_decode_the_tensor_is_the_full_decode_s(spark, photos, backend):
    read = read_images(spark, str(photos), backend=backend)
    out = _transformer(inputCol="image", reducedDecode=False).setBackend(backend).transform(read)
    got = _by_name(out, "tensor")
    expected = _bytes_reference(spark, photos, reducedDecode=False)
    full = cv2.imread(str(photos / "camera.jpg"))
    resized = cv2.resize(full, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
    assert np.abs(_pixels_of(got["camera.jpg"][0]) - resized).max() <= 1
    for name in ("camera.jpg", "second.jpg", "small.png"):
        np.testing.assert_array_equal(np.asarray(got[name][0]), np.asarray(expected[name][0]))


def _udfs(df) -> int:
    """The decodes left in `df`'s optimized plan: the JVM's UDFs (ONNXModel is a mapPartitions),
    the Python backend's UDFs (its stages are one mapInArrow, which holds no decode of `image`)."""
    plan = str(df._jdf.queryExecution().optimizedPlan().toString())
    return plan.count("UDF(") + plan.count("FileReader(")


def _steps(df) -> int:
    """The Python backend's Arrow UDFs (its fused stages) in `df`'s optimized plan."""
    return str(df._jdf.queryExecution().optimizedPlan().toString()).count("MapInArrow")


@pytest.mark.lines
@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_through_onnx_the_full_image_is_decoded_only_where_it_is_read(spark, photos, backend):
    """read_images -> ImageTransformer -> ONNXModel: one decode per photo (the resize's), unless
    `image` is selected; the same scores as on the cached, fully decoded read."""
    model = ONNXModel(inputCol="tensor", outputCol="logits").setModelPayload(
        onnx_models.small_cnn(classes=3, size=SIZE)
    )
    model.setBackend(backend)
    transformer = _transformer(inputCol="image").setBackend(backend)
    read = read_images(spark, str(photos), backend=backend)
    scored = model.transform(transformer.transform(read))
    assert scored.columns == [
        "path",
        "image",
        "error",
        "tensor",
        "transformError",
        "logits",
        "onnxError",
    ]
    lean = scored.select("path", "error", "logits", "onnxError")
    # JVM: the transformer's decode; Python: one Arrow UDF reads, transforms and scores.
    assert _udfs(lean) == (1 if backend == "jvm" else 0)
    assert _udfs(scored) == _udfs(lean) + 1  # the image read: computed, as asked
    if backend == "python":
        assert _steps(lean) == 1
    cached = read_images(spark, str(photos), backend=backend).cache()
    try:
        reference = model.transform(transformer.transform(cached))
        if backend == "jvm":
            assert _udfs(reference.select("path", "logits")) >= 1
        expected = _by_name(reference, "image", "error", "logits", "onnxError")
    finally:
        cached.unpersist()
    got = _by_name(scored, "image", "error", "logits", "onnxError")
    assert _by_name(lean, "error", "logits") == {
        k: (v[1], v[2]) for k, v in got.items()
    }  # the same rows with and without the image
    assert sorted(got) == sorted(expected)
    for name, (image, error, logits, onnx_error) in got.items():
        assert (error, onnx_error) == (expected[name][1], expected[name][3]), name
        assert image == expected[name][0], name  # the full image, where selected
        if logits is None:
            assert expected[name][2] is None, name
            continue
        np.testing.assert_allclose(logits, expected[name][2], rtol=1e-5, err_msg=name)
    assert got["small.png"][0]["height"] == 150 and got["camera.jpg"][0]["width"] == 4000


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_spark_read_image_puts_image_first_and_still_decodes_each_photo_once(
    spark, photos, backend, monkeypatch
):
    """SynapseML's reader layout (`image` first) is read_images' own output reordered: an
    ImageTransformer on it still reads the files itself, at the resize's scale."""
    import mmlspark.io  # noqa: F401 - adds spark.read.image()

    monkeypatch.setenv("MMLSPARK_BACKEND", backend)  # the reader's backend: the setting's
    read = spark.read.image().load(str(photos))
    assert read.columns == ["image", "path", "error"]
    tensors = _transformer(inputCol="image").setBackend(backend).transform(read)
    assert tensors.columns[:3] == ["image", "path", "error"]
    # one decode (JVM: the transformer's UDF; Python: in its Arrow UDF), the image left unread
    assert _udfs(tensors.select("path", "tensor")) == (1 if backend == "jvm" else 0)
    camera = _by_name(tensors, "tensor")["camera.jpg"][0]
    expected = _reduced_by_opencv(str(photos / "camera.jpg"))
    assert np.abs(_pixels_of(camera) - expected).max() <= 1


def test_a_broken_link_keeps_the_listing_s_error(spark, photos, tmp_path):
    """The listing's own errors (a broken link) reach `error` when the transformer reads the
    files itself."""
    for name in ("camera.jpg", "small.png"):
        os.symlink(photos / name, tmp_path / name)
    os.symlink(tmp_path / "gone.jpg", tmp_path / "broken.jpg")
    read = read_images(spark, str(tmp_path))
    expected = _by_name(read, "error")
    out = _transformer(inputCol="image").transform(read)
    got = _by_name(out, "error", "transformError")
    assert expected["broken.jpg"][0]
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in expected.items()}
    assert got["broken.jpg"][1] == "no input image (null)" and got["camera.jpg"][1] is None


def test_a_photo_the_read_refuses_is_refused_alike_when_the_transformer_reads_it(spark, photos):
    """Over the pixel limit at full size but not at the resize's scale: the transformer reading
    the files itself still gives the read's refusal, on both backends, and the photos under the
    limit their tensors."""
    from test_python_images import pixel_limit

    got = {}
    with pixel_limit(spark, 5_000_000):  # camera.jpg has 12 MP, second.jpg 1.08
        for backend in ("jvm", "python"):
            read = read_images(spark, str(photos), backend=backend)
            out = _transformer(inputCol="image").setBackend(backend).transform(read)
            got[backend] = _by_name(out.drop("image"), "error", "transformError", "tensor")
    for backend, rows in got.items():
        error, transform_error, tensor = rows["camera.jpg"]
        assert "4000x3000 (12.0 MP), over the limit of 5.0 MP" in error, (backend, error)
        assert transform_error == "no input image (null)" and tensor is None, backend
        assert rows["second.jpg"][0] is None and len(rows["second.jpg"][2]) == 3 * SIZE * SIZE
    for name in got["python"]:
        assert got["python"][name][:2] == got["jvm"][name][:2], name


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_a_detector_on_read_images_decodes_each_photo_once(spark, photos, backend):
    """read_images -> ObjectDetector (docs/detection.md): the detector reads the files itself at
    the letterbox's scale, as on the files' bytes, so a 12 MP photo is not decoded at full size
    unless `image` is selected; the same detections and errors as binaryFile -> ObjectDetector."""
    from mmlspark.detection import ObjectDetector

    def detector(column: str) -> ObjectDetector:
        stage = ObjectDetector(inputCol=column, confidenceThreshold=0.3).setBackend(backend)
        return stage.setModelPayload(onnx_models.yolo_echo())

    read = read_images(spark, str(photos), backend=backend)
    found = detector("image").transform(read)
    assert found.columns == ["path", "image", "error", "detections", "detectionError"]
    lean = found.select("path", "error", "detections", "detectionError")
    # JVM: the detector's file read and its decoding of the model's output (the model is a
    # mapPartitions), no decode of `image`; Python: one Arrow UDF.
    assert _udfs(lean) == (2 if backend == "jvm" else 0)
    assert _udfs(found) == _udfs(lean) + 1  # the image read: computed, as asked
    if backend == "python":
        assert _steps(lean) == 1
    files = spark.read.format("binaryFile").load(str(photos))
    expected = _by_name(detector("content").transform(files), "detections", "detectionError")
    errors = _by_name(read_images(spark, str(photos), backend=backend), "error")
    got = _by_name(found, "image", "error", "detections", "detectionError")
    assert sorted(got) == sorted(errors)
    for name, (image, error, detections, detection_error) in got.items():
        assert error == errors[name][0], name  # the read's own error
        if error is not None:
            assert image is None and detections is None, name
            assert detection_error == "no input image (null)", name
            continue
        assert (detections, detection_error) == expected[name], name
    assert any(got[name][2] for name in ("camera.jpg", "second.jpg", "small.png"))
    assert got["camera.jpg"][0]["height"] == 3000  # the full image, where selected
