"""Code written the way SynapseML's public API documentation writes it, with only the imports
changed (``synapse.ml.X`` -> ``mmlspark.X``). Each snippet's result is checked against an
independent reference: opencv-python and numpy for the image operations, onnxruntime for the
models, the input rows for the batching stages.

The deliberate differences that remain are listed in the README's migration table; the tests at
the end check that each one fails with an error that names the SynapseML form and ours.
"""

from __future__ import annotations

import cv2
import numpy as np
import onnx_models
import onnxruntime as ort
import pytest
from image_fixtures import pattern
from pyspark.sql.types import DoubleType, FloatType

from mmlspark.image import read_images
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer
from mmlspark.stages import DynamicMiniBatchTransformer, FixedMiniBatchTransformer, FlattenBatch

SIZE = (40, 56)  # height, width of the photos


@pytest.fixture(scope="module")
def photos(spark, tmp_path_factory):
    """Lossless photos (so opencv-python decodes the same pixels), read the library's way, and
    the BGR arrays they hold, by file name."""
    folder = tmp_path_factory.mktemp("compat-photos")
    arrays = {}
    for i in range(6):
        image = pattern(*SIZE, seed=i)
        cv2.imwrite(str(folder / f"p{i}.png"), image)
        arrays[f"p{i}.png"] = image
    return read_images(spark, str(folder)), arrays


def by_name(df, column: str) -> dict[str, object]:
    return {r["path"].rsplit("/", 1)[-1]: r[column] for r in df.collect()}


def pixels(image_row) -> np.ndarray:
    from mmlspark.image import to_ndarray

    return to_ndarray(image_row)


def chw_rgb(bgr: np.ndarray) -> np.ndarray:
    return bgr[:, :, ::-1].transpose(2, 0, 1).astype(np.float32)


# --- ImageTransformer: SynapseML's call forms ---------------------------------------------------


def test_resize_with_a_size_tuple_then_crop_by_keyword(photos):
    df, arrays = photos
    tr = (
        ImageTransformer()
        .setOutputCol("transformed")
        .resize(size=(30, 32))
        .crop(0, 0, height=20, width=24)
    )
    out = by_name(tr.transform(df), "transformed")
    for name, bgr in arrays.items():
        expected = cv2.resize(bgr, (32, 30), interpolation=cv2.INTER_LINEAR)[:20, :24]
        np.testing.assert_array_equal(pixels(out[name]), expected)


def test_positional_size_and_keep_aspect_ratio(photos):
    df, arrays = photos
    tr = ImageTransformer().setOutputCol("transformed").resize(20, True)
    out = by_name(tr.transform(df), "transformed")
    for name, bgr in arrays.items():
        # The shorter side (40) becomes 20; the longer keeps the aspect ratio: 56 * 20 / 40 = 28.
        expected = cv2.resize(bgr, (28, 20), interpolation=cv2.INTER_LINEAR)
        np.testing.assert_array_equal(pixels(out[name]), expected)


def test_color_format_with_an_opencv_code_and_a_blur_and_threshold_by_keyword(photos):
    df, arrays = photos
    tr = (
        ImageTransformer()
        .setOutputCol("transformed")
        .colorFormat(format=cv2.COLOR_BGR2GRAY)
        .blur(height=3, width=3)
        .threshold(threshold=100, maxVal=200, thresholdType=cv2.THRESH_BINARY)
    )
    out = by_name(tr.transform(df), "transformed")
    for name, bgr in arrays.items():
        gray = cv2.blur(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), (3, 3))
        _, expected = cv2.threshold(gray, 100, 200, cv2.THRESH_BINARY)
        np.testing.assert_array_equal(pixels(out[name])[:, :, 0], expected)


def test_gaussian_kernel_with_synapseml_spelling_and_flip(photos):
    df, arrays = photos
    tr = (
        ImageTransformer()
        .setOutputCol("transformed")
        .gaussianKernel(appertureSize=5, sigma=1.5)
        .flip(flipCode=1)
    )
    out = by_name(tr.transform(df), "transformed")
    for name, bgr in arrays.items():
        expected = cv2.flip(cv2.GaussianBlur(bgr, (5, 5), 1.5), 1)
        np.testing.assert_array_equal(pixels(out[name]), expected)


def test_normalize_with_snake_case_gives_a_tensor(photos):
    df, arrays = photos
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    tr = (
        ImageTransformer()
        .setOutputCol("features")
        .resize(height=24, width=24)
        .normalize(mean=mean, std=std, color_scale_factor=1 / 255)
        .setTensorElementType(FloatType())
    )
    assert tr.getToTensor()
    out = by_name(tr.transform(df), "features")
    for name, bgr in arrays.items():
        resized = chw_rgb(cv2.resize(bgr, (24, 24), interpolation=cv2.INTER_LINEAR))
        m = np.array(mean, np.float32)[:, None, None]
        s = np.array(std, np.float32)[:, None, None]
        expected = (resized * np.float32(1 / 255) - m) / s
        np.testing.assert_allclose(np.array(out[name]), expected.ravel(), rtol=1e-5, atol=1e-6)


def test_tensor_channel_order_in_lower_case(photos):
    df, arrays = photos
    tr = ImageTransformer(outputCol="t", toTensor=True, tensorChannelOrder="bgr").resize(8, 8)
    out = by_name(tr.transform(df), "t")
    for name, bgr in arrays.items():
        expected = cv2.resize(bgr, (8, 8)).transpose(2, 0, 1).astype(np.float32).ravel()
        np.testing.assert_array_equal(np.array(out[name]), expected)


# --- ONNXModel: SynapseML's spellings -----------------------------------------------------------


def test_onnx_model_with_synapseml_device_and_optimization_spellings(photos):
    df, arrays = photos
    tensors = ImageTransformer(inputCol="image", outputCol="image_t", toTensor=True).resize(16, 16)
    model = (
        ONNXModel()
        .setModelPayload(onnx_models.small_cnn())
        .setDeviceType("CPU")
        .setOptimizationLevel("ALL_OPT")
        .setFeedDict({"image": "image_t"})
        .setFetchDict({"logits": "logits"})
        .setSoftMaxDict({"logits": "probability"})
        .setArgMaxDict({"logits": "prediction"})
    )
    out = {
        r["path"].rsplit("/", 1)[-1]: r for r in model.transform(tensors.transform(df)).collect()
    }
    session = ort.InferenceSession(onnx_models.small_cnn(), providers=["CPUExecutionProvider"])
    for name, bgr in arrays.items():
        feed = chw_rgb(cv2.resize(bgr, (16, 16)))[None]
        logits = session.run(["logits"], {"image": feed})[0][0]
        np.testing.assert_allclose(out[name]["logits"], logits, rtol=1e-4, atol=1e-6)
        assert out[name]["prediction"] == float(np.argmax(logits))


# --- Batching stages ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numbers(spark):
    return spark.createDataFrame([(i, f"row {i}") for i in range(50)], "id int, text string")


def test_fixed_mini_batch_then_flatten(numbers):
    batched = FixedMiniBatchTransformer(batchSize=7).transform(numbers.coalesce(1))
    sizes = [len(r["id"]) for r in batched.collect()]
    assert sizes == [7] * 7 + [1]
    flat = FlattenBatch().transform(batched)
    assert sorted(tuple(r) for r in flat.collect()) == sorted(tuple(r) for r in numbers.collect())


def test_buffered_fixed_mini_batch_keeps_every_row_in_order(numbers):
    batched = FixedMiniBatchTransformer(batchSize=8, buffered=True, maxBufferSize=3).transform(
        numbers.coalesce(1)
    )
    ids = [i for r in batched.collect() for i in r["id"]]
    assert ids == list(range(50))


def test_dynamic_mini_batch_then_flatten(numbers):
    batched = DynamicMiniBatchTransformer(maxBatchSize=16).transform(numbers)
    rows = batched.collect()
    assert all(1 <= len(r["id"]) <= 16 for r in rows)
    flat = FlattenBatch().transform(batched)
    assert sorted(tuple(r) for r in flat.collect()) == sorted(tuple(r) for r in numbers.collect())


# --- Deliberate differences: the error names SynapseML's form and ours --------------------------


def test_double_tensors_are_refused_naming_the_way_to_get_them():
    with pytest.raises(ValueError, match="float32.*cast the output column to array<double>"):
        ImageTransformer().setTensorElementType(DoubleType())


def test_an_unknown_color_code_names_the_accepted_ones(spark, photos):
    df, _ = photos
    with pytest.raises(Exception, match="format must be one of 'RGB', 'BGR', 'GRAY'"):
        ImageTransformer(outputCol="x").colorFormat(cv2.COLOR_BGR2HSV).transform(df).collect()


# --- ImageFeaturizer: SynapseML's param names and its handling of bad images --------------------


def test_image_featurizer_with_synapseml_names_then_a_fit_despite_a_broken_photo(
    spark, photos, tmp_path
):
    from onnx.utils import extract_model
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression
    from pyspark.sql import functions as F

    from mmlspark.image import ImageFeaturizer

    df, arrays = photos
    broken = spark.createDataFrame([("broken.png",)], "path string").withColumn(
        "image", F.lit(None).cast(df.schema["image"].dataType)
    )
    labelled = (
        df.select("path", "image")
        .unionByName(broken)
        .withColumn("label", (F.rand(seed=3) > 0.5).cast("double"))
    )
    featurizer = ImageFeaturizer(
        inputCol="image",
        outputCol="features",
        featureTensorName="features",
        imageHeight=16,
        imageWidth=16,
        channelNormalizationMeans=[0.5, 0.4, 0.3],
        channelNormalizationStds=[0.25, 0.2, 0.3],
        colorScaleFactor=1 / 255,
        ignoreDecodingErrors=False,
        dropNa=True,
        autoConvertToColor=True,
    ).setModelPayload(onnx_models.small_cnn())
    assert featurizer.getChannelNormalizationMeans() == [0.5, 0.4, 0.3]
    fitted = Pipeline(stages=[featurizer, LogisticRegression(maxIter=5)]).fit(labelled)
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in fitted.transform(labelled).collect()}
    assert sorted(rows) == sorted(arrays)  # the broken photo's row is dropped (dropNa)

    (tmp_path / "full.onnx").write_bytes(onnx_models.small_cnn())
    extract_model(str(tmp_path / "full.onnx"), str(tmp_path / "cut.onnx"), ["image"], ["features"])
    session = ort.InferenceSession(str(tmp_path / "cut.onnx"), providers=["CPUExecutionProvider"])
    mean = np.array([0.5, 0.4, 0.3], np.float32)[:, None, None]
    std = np.array([0.25, 0.2, 0.3], np.float32)[:, None, None]
    for name, bgr in arrays.items():
        tensor = (chw_rgb(cv2.resize(bgr, (16, 16))) * np.float32(1 / 255) - mean) / std
        expected = session.run(["features"], {"image": tensor[None]})[0][0]
        np.testing.assert_allclose(rows[name]["features"].toArray(), expected, rtol=1e-4, atol=1e-6)


# --- Statistics: SynapseML's names for the score columns ----------------------------------------


def test_statistics_with_synapseml_column_names(spark):
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import VectorAssembler
    from sklearn import metrics

    from mmlspark.train import ComputeModelStatistics, ComputePerInstanceStatistics

    rng = np.random.default_rng(12)
    x = rng.normal(size=(120, 2))
    y = (x[:, 0] - x[:, 1] + rng.normal(0, 0.5, 120) > 0).astype(float)
    df = spark.createDataFrame(
        [(float(a), float(b), float(c)) for (a, b), c in zip(x, y, strict=True)],
        "a double, b double, y double",
    )
    assembled = VectorAssembler(inputCols=["a", "b"], outputCol="features").transform(df)
    scored = (
        LogisticRegression(labelCol="y", predictionCol="guess", probabilityCol="p")
        .fit(assembled)
        .transform(assembled)
    )
    stats = (
        ComputeModelStatistics(labelCol="y", scoredLabelsCol="guess", scoresCol="p")
        .transform(scored)
        .first()
    )
    rows = scored.select("y", "guess", "p").collect()
    truth = [r.y for r in rows]
    assert stats.accuracy == pytest.approx(metrics.accuracy_score(truth, [r.guess for r in rows]))
    assert stats.AUC == pytest.approx(metrics.roc_auc_score(truth, [r.p[1] for r in rows]))
    per_row = ComputePerInstanceStatistics(labelCol="y").setScoredLabelsCol("guess")
    per_row.setScoredProbabilitiesCol("p")
    assert per_row.getScoredProbabilitiesCol() == per_row.getProbabilityCol() == "p"
    losses = [r.log_loss for r in per_row.transform(scored).collect()]
    expected = [metrics.log_loss([r.y], [list(r.p)], labels=[0.0, 1.0]) for r in rows]
    np.testing.assert_allclose(losses, expected, rtol=1e-9)


# --- Image helpers: SynapseML's toNDArray (RGB) and toImage -------------------------------------


def test_to_ndarray_gives_rgb_and_to_image_takes_it(spark, photos):
    from mmlspark.opencv import ImageTransformer, toImage, toNDArray

    df, arrays = photos
    images = by_name(df, "image")
    for name, bgr in arrays.items():
        rgb = toNDArray(images[name])
        np.testing.assert_array_equal(rgb, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        row = toImage(rgb, path=name)
        assert (row.height, row.width, row.nChannels, row.mode) == (*SIZE, 3, 16)
        np.testing.assert_array_equal(toNDArray(row), rgb)
    # A struct toImage made is one the stages read: flip it and compare with OpenCV.
    made = spark.createDataFrame([(toImage(cv2.cvtColor(arrays["p0.png"], cv2.COLOR_BGR2RGB)),)],
                                 df.select("image").schema)  # fmt: skip
    flipped = ImageTransformer(outputCol="out").flip(flipCode=0).transform(made).first()["out"]
    np.testing.assert_array_equal(pixels(flipped), cv2.flip(arrays["p0.png"], 0))
    with pytest.raises(TypeError, match="fluent methods.*'stages' list of maps is not read"):
        ImageTransformer(stages=[{"action": "resize", "height": 10, "width": 10}])


def test_drop_columns_with_an_empty_list_drops_nothing(numbers):
    from mmlspark.stages import DropColumns

    out = DropColumns(cols=[]).transform(numbers)
    assert out.columns == numbers.columns
    assert sorted(tuple(r) for r in out.collect()) == sorted(tuple(r) for r in numbers.collect())
