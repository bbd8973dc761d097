"""Code written the way SynapseML's public API documentation writes it, with only the imports
changed (``synapse.ml.X`` -> ``mmlspark.X``). Each snippet's result is checked against an
independent reference: opencv-python and numpy for the image operations, onnxruntime for the
models, the input rows for the batching stages.

The deliberate differences that remain are listed in the migration table of docs/synapseml.md;
the tests at the end check that each one fails with an error that names the SynapseML form and
ours.
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


def test_model_zoo_params_are_refused_naming_what_to_use(spark):
    from mmlspark.onnx import ImageFeaturizer

    with pytest.raises(TypeError, match="'headless' has no counterpart.*featureTensorName"):
        ImageFeaturizer(inputCol="image", outputCol="features", headless=True)
    with pytest.raises(TypeError, match="'model'.*no model zoo.*modelLocation.*setModelPayload"):
        ImageFeaturizer().setModel("ResNet50")
    with pytest.raises(TypeError, match="'cutOutputLayers'.*featureTensorName"):
        ImageFeaturizer().setCutOutputLayers(1)
    with pytest.raises(TypeError, match="'headless'"):
        ImageFeaturizer().setParams(headless=False)


def test_time_interval_batching_names_the_stage_to_use():
    from mmlspark.stages import TimeIntervalMiniBatchTransformer

    with pytest.raises(
        TypeError, match=r"BufferedMiniBatchTransformer\(miniBatchSize=<maxBatchSize>, "
    ):
        TimeIntervalMiniBatchTransformer(millisToWait=1000, maxBatchSize=10)


def test_stages_synapseml_keeps_in_another_package_import_from_its_package_too():
    # SynapseML's SummarizeData is in synapse.ml.stages; here it is a featurization stage.
    import mmlspark.featurize
    import mmlspark.stages

    assert mmlspark.stages.SummarizeData is mmlspark.featurize.SummarizeData
    assert "SummarizeData" in mmlspark.stages.__all__
    # SynapseML's ImageFeaturizer is in synapse.ml.onnx, as ours is; its former home exports it too.
    import mmlspark.image
    import mmlspark.onnx

    assert mmlspark.image.ImageFeaturizer is mmlspark.onnx.ImageFeaturizer
    assert "ImageFeaturizer" in mmlspark.onnx.__all__
    assert "ImageFeaturizer" in mmlspark.image.__all__
    # SynapseML's ImageSetAugmenter is in synapse.ml.opencv, as ours is; both imports work.
    import mmlspark.opencv
    from mmlspark.image import ImageSetAugmenter as from_image
    from mmlspark.opencv import ImageSetAugmenter as from_opencv

    assert from_image is from_opencv
    assert from_opencv._java_class_name == "mmlspark.opencv.ImageSetAugmenter"
    assert "ImageSetAugmenter" in mmlspark.opencv.__all__
    assert "ImageSetAugmenter" in mmlspark.image.__all__


# --- ImageFeaturizer: SynapseML's param names and its handling of bad images --------------------


def test_image_featurizer_with_synapseml_names_then_a_fit_despite_a_broken_photo(
    spark, photos, tmp_path
):
    from onnx.utils import extract_model
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression
    from pyspark.sql import functions as F

    from mmlspark.onnx import ImageFeaturizer

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


def test_a_udf_returning_images_takes_image_schema_as_its_type(spark, photos):
    from pyspark.sql.functions import udf

    from mmlspark.opencv import ImageSchema, toImage, toNDArray

    def u(row):
        array = toNDArray(row)  # RGB
        array[:, :, 2] = 0  # no blue
        return toImage(array)

    df, arrays = photos
    out = by_name(df.withColumn("noblue", udf(u, ImageSchema)(df["image"])), "noblue")
    assert out.keys() == arrays.keys()
    for name, bgr in arrays.items():
        expected = bgr.copy()
        expected[:, :, 0] = 0  # blue is the first of OpenCV's BGR channels
        np.testing.assert_array_equal(pixels(out[name]), expected)
    assert df.withColumn("noblue", udf(u, ImageSchema)("image")).schema["noblue"].dataType == (
        df.schema["image"].dataType
    )


def test_drop_columns_with_an_empty_list_drops_nothing(numbers):
    from mmlspark.stages import DropColumns

    out = DropColumns(cols=[]).transform(numbers)
    assert out.columns == numbers.columns
    assert sorted(tuple(r) for r in out.collect()) == sorted(tuple(r) for r in numbers.collect())


# --- Readers: spark.read.image() after importing the io package ---------------------------------


def test_read_image_and_read_stream_image_after_the_io_import(spark, photos, tmp_path):
    import mmlspark.io  # noqa: F401 - as SynapseML's docs import synapse.ml.io (with *)

    df, arrays = photos
    folder = df.first()["path"].rsplit("/", 1)[0]
    images = spark.read.image().option("dropInvalid", True).load(folder)
    got = {r["image"]["origin"].rsplit("/", 1)[-1]: r["image"] for r in images.collect()}
    assert set(got) == set(arrays)
    for name, bgr in arrays.items():
        np.testing.assert_array_equal(pixels(got[name]), bgr)
    stream = spark.readStream.image().options(maxFilesPerTrigger=2).load(folder)
    query = (
        stream.select("image.origin").writeStream.format("memory").queryName("compat_images")
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    assert spark.table("compat_images").count() == len(arrays)
    with pytest.raises(ValueError, match="unknown option 'inspectZip'.*dropInvalid"):
        spark.read.image().option("inspectZip", True)


# --- Stages: EnsembleByKey, the column stages, ClassBalancer ------------------------------------


def test_ensemble_by_key_names_its_output_columns(spark):
    from mmlspark.stages import EnsembleByKey

    rows = [("a", 0.2), ("a", 0.6), ("b", 0.5), ("b", 0.9), ("b", 0.1)]
    df = spark.createDataFrame(rows, "key string, score double")
    ensemble = EnsembleByKey(keys=["key"], cols=["score"], strategy="mean")
    assert ensemble.getColNames() == ["mean(score)"]
    out = {r["key"]: r["mean(score)"] for r in ensemble.transform(df).collect()}
    for key in ("a", "b"):
        assert out[key] == pytest.approx(np.mean([s for k, s in rows if k == key]))
    assert EnsembleByKey(cols=["score"], colNames=["avg"]).getColNames() == ["avg"]


def test_column_stages_in_a_pipeline(spark):
    from pyspark.ml import Pipeline

    from mmlspark.stages import Cacher, DropColumns, RenameColumn, Repartition, SelectColumns

    df = spark.createDataFrame([(i, i * i, f"r{i}") for i in range(20)], "a int, b int, c string")
    pipeline = Pipeline(
        stages=[
            SelectColumns(cols=["a", "b"]),
            RenameColumn(inputCol="b", outputCol="squared"),
            Repartition(n=3),
            Cacher(),
            DropColumns(cols=["a"]),
        ]
    )
    out = pipeline.fit(df).transform(df)
    assert out.columns == ["squared"] and out.rdd.getNumPartitions() == 3
    assert sorted(r["squared"] for r in out.collect()) == [i * i for i in range(20)]


def test_functions_as_stages_as_synapseml_writes_them(spark):
    from pyspark.ml.feature import Tokenizer
    from pyspark.sql.functions import udf
    from pyspark.sql.types import IntegerType

    from mmlspark.stages import Lambda, MultiColumnAdapter, UDFTransformer

    rows = [(1, "Hello World", "Spark ML"), (2, "a B c", "D")]
    df = spark.createDataFrame(rows, ["numbers", "words1", "words2"])
    plus_one = UDFTransformer(
        inputCol="numbers", outputCol="out", udf=udf(lambda x: x + 1, IntegerType())
    )
    adapter = (
        MultiColumnAdapter()
        .setBaseStage(Tokenizer())
        .setInputCols(["words1", "words2"])
        .setOutputCols(["output1", "output2"])
    )
    only = Lambda.apply(lambda d: d.select("numbers", "out", "output1", "output2"))
    out = only.transform(adapter.fit(df).transform(plus_one.transform(df))).orderBy("numbers")
    assert [tuple(r) for r in out.collect()] == [
        (n, n + 1, a.lower().split(), b.lower().split()) for n, a, b in rows
    ]


def test_class_balancer_weights_rare_classes_up(spark):
    from mmlspark.stages import ClassBalancer

    labels = ["deer"] * 6 + ["fox"] * 3 + ["boar"] * 1
    df = spark.createDataFrame([(x,) for x in labels], "label string")
    weighted = ClassBalancer().setInputCol("label").fit(df).transform(df).collect()
    counts = {x: labels.count(x) for x in set(labels)}
    for r in weighted:  # rarer classes weigh more, in inverse proportion to their counts
        assert r["weight"] * counts[r["label"]] == pytest.approx(len(labels) / len(counts))


# --- Training and evaluation: the columns found from the trained model ----------------------------


@pytest.fixture(scope="module")
def census(spark):
    """An adult-census-shaped table: numbers, a category and a string label."""
    rng = np.random.default_rng(21)
    n = 300
    age = rng.integers(18, 70, n)
    hours = rng.integers(10, 60, n)
    work = rng.choice(["Private", "Self-emp", "Gov"], n)
    score = 0.05 * (age - 40) + 0.08 * (hours - 35) + (work == "Self-emp") + rng.normal(0, 1, n)
    income = np.where(score > 0.3, ">50K", "<=50K")
    columns = zip(age, hours, work, income, strict=True)
    rows = [(int(a), int(h), str(w), str(y)) for a, h, w, y in columns]
    df = spark.createDataFrame(rows, "age int, hours_per_week int, workclass string, income string")
    return df.randomSplit([0.75, 0.25], seed=123)


def test_train_classifier_then_statistics_without_column_names(census):
    from pyspark.ml.classification import LogisticRegression
    from sklearn import metrics

    from mmlspark.train import ComputeModelStatistics, ComputePerInstanceStatistics, TrainClassifier

    train, test = census
    model = TrainClassifier(model=LogisticRegression(), labelCol="income", numFeatures=256).fit(
        train
    )
    prediction = model.transform(test)
    stats = ComputeModelStatistics().transform(prediction)
    rows = prediction.select("income", "prediction", "probability").collect()
    truth, guessed = [r.income for r in rows], [r.prediction for r in rows]
    assert stats.select("accuracy").first()[0] == pytest.approx(
        metrics.accuracy_score(truth, guessed)
    )
    per_row = ComputePerInstanceStatistics().transform(prediction).collect()
    labels = stats.first().labels
    losses = [metrics.log_loss([r.income], [list(r.probability)], labels=labels) for r in per_row]
    np.testing.assert_allclose([r.log_loss for r in per_row], losses, rtol=1e-9)


def test_train_regressor_then_regression_statistics(spark):
    from pyspark.ml.regression import LinearRegression
    from sklearn import metrics

    from mmlspark.train import ComputeModelStatistics, TrainRegressor

    rng = np.random.default_rng(4)
    n = 200
    distance = rng.uniform(100, 3000, n)
    carrier = rng.choice(["AA", "DL", "UA"], n)
    delay = 0.01 * distance + 5 * (carrier == "UA") + rng.normal(0, 2, n)
    df = spark.createDataFrame(
        [(float(d), str(c), float(y)) for d, c, y in zip(distance, carrier, delay, strict=True)],
        "Distance double, Carrier string, ArrDelay double",
    )
    train, test = df.randomSplit([0.75, 0.25], seed=1)
    model = TrainRegressor(model=LinearRegression(), labelCol="ArrDelay", numFeatures=1 << 18).fit(
        train
    )
    scored = model.transform(test)
    stats = ComputeModelStatistics(evaluationMetric="regression").transform(scored).first()
    rows = scored.select("ArrDelay", "prediction").collect()
    truth, guessed = [r.ArrDelay for r in rows], [r.prediction for r in rows]
    assert stats.mean_squared_error == pytest.approx(metrics.mean_squared_error(truth, guessed))
    assert stats.root_mean_squared_error == pytest.approx(
        metrics.mean_squared_error(truth, guessed) ** 0.5
    )
    assert stats.mean_absolute_error == pytest.approx(metrics.mean_absolute_error(truth, guessed))


def test_find_best_model_over_regularisation_strengths(census):
    from pyspark.ml.classification import LogisticRegression
    from sklearn import metrics

    from mmlspark.automl import FindBestModel
    from mmlspark.train import TrainClassifier

    train, test = census
    lrmodels = [
        TrainClassifier(model=LogisticRegression(regParam=hyperParam), labelCol="income",
                        numFeatures=10000).fit(train)
        for hyperParam in [0.05, 0.1, 0.2, 0.4, 50.0]
    ]  # fmt: skip
    bestModel = FindBestModel(evaluationMetric="AUC", models=lrmodels).fit(test)
    predictions = bestModel.transform(test)

    def auc(model) -> float:
        rows = model.transform(test).select("income", "probability").collect()
        positive = model.getLevels().index(">50K")
        return metrics.roc_auc_score(
            [r.income == ">50K" for r in rows], [r.probability[positive] for r in rows]
        )

    aucs = {m.uid: auc(m) for m in lrmodels}
    assert aucs[bestModel.getBestModel().uid] == pytest.approx(max(aucs.values()))
    assert min(aucs.values()) < max(aucs.values())  # a real choice
    assert bestModel.getBestModelMetrics().first().AUC == pytest.approx(max(aucs.values()))
    assert predictions.count() == test.count()
    assert bestModel.getAllModelMetrics().count() == len(lrmodels)


# --- ONNXModel: ZipMap outputs, softmax and argmax ----------------------------------------------


def test_onnx_model_with_a_zipmap_output_and_setters(spark):
    model_payload_ml = onnx_models.zipmap_classifier(["cat", "deer"])
    rng = np.random.default_rng(6)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    testdf = spark.createDataFrame(
        [(i, x[i].tolist()) for i in range(12)], "id int, features array<float>"
    )
    onnx_ml = (
        ONNXModel()
        .setModelPayload(model_payload_ml)
        .setDeviceType("CPU")
        .setFeedDict({"x": "features"})
        .setFetchDict({"probability": "output_probability", "prediction": "output_label"})
        .setMiniBatchSize(5000)
    )
    rows = {r["id"]: r for r in onnx_ml.transform(testdf).collect()}
    session = ort.InferenceSession(model_payload_ml, providers=["CPUExecutionProvider"])
    labels, maps = session.run(["output_label", "output_probability"], {"x": x})
    for i in range(12):
        assert rows[i]["prediction"] == labels[i]
        assert rows[i]["probability"] == pytest.approx(maps[i], rel=1e-6)


def test_onnx_model_softmax_and_argmax_dicts_give_vectors(spark, photos):
    from pyspark.ml.linalg import DenseVector

    df, arrays = photos
    features = (
        ImageTransformer(inputCol="image", outputCol="features")
        .resize(size=(16, 16))
        .normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], color_scale_factor=1.0)
        .transform(df)
    )
    onnx_model = (
        ONNXModel()
        .setModelPayload(onnx_models.small_cnn())
        .setFeedDict({"image": "features"})
        .setFetchDict({"rawPrediction": "logits"})
        .setSoftMaxDict({"rawPrediction": "probability"})
        .setArgMaxDict({"rawPrediction": "prediction"})
        .setMiniBatchSize(64)
    )
    rows = by_name(onnx_model.transform(features), "probability")
    predictions = by_name(onnx_model.transform(features), "prediction")
    session = ort.InferenceSession(onnx_models.small_cnn(), providers=["CPUExecutionProvider"])
    for name, bgr in arrays.items():
        tensor = chw_rgb(cv2.resize(bgr, (16, 16)))[None]
        logits = session.run(["logits"], {"image": tensor})[0][0]
        expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert isinstance(rows[name], DenseVector)
        np.testing.assert_allclose(rows[name].toArray(), expected, rtol=1e-5)
        assert predictions[name] == int(np.argmax(logits))


# --- ImageTransformer then UnrollImage -----------------------------------------------------------


def test_image_transformer_then_unroll_image(photos):
    from mmlspark.image import UnrollImage

    df, arrays = photos
    tr = (
        ImageTransformer()
        .setOutputCol("transformed")
        .resize(height=30, width=40)
        .crop(0, 0, height=20, width=24)
    )
    small = tr.transform(df).select("path", "transformed")
    unroll = UnrollImage().setInputCol("transformed").setOutputCol("features")
    vectors = by_name(unroll.transform(small), "features")
    for name, bgr in arrays.items():
        expected = cv2.resize(bgr, (40, 30))[:20, :24].transpose(2, 0, 1).ravel()
        np.testing.assert_array_equal(vectors[name].toArray(), expected.astype(float))


# --- ImageSetAugmenter: from synapse.ml.opencv, as SynapseML has it -----------------------------


def test_image_set_augmenter_from_opencv_adds_each_images_flips(photos):
    from mmlspark.opencv import ImageSetAugmenter

    df, arrays = photos
    aug = (
        ImageSetAugmenter()
        .setInputCol("image")
        .setOutputCol("augmented")
        .setFlipLeftRight(True)
        .setFlipUpDown(True)
    )
    images = {}
    for r in aug.transform(df).collect():
        images.setdefault(r["path"].rsplit("/", 1)[-1], []).append(pixels(r["augmented"]))
    assert images.keys() == arrays.keys()
    for name, bgr in arrays.items():
        # the image, then its left-right mirror, then its upside-down mirror
        expected = [bgr, cv2.flip(bgr, 1), cv2.flip(bgr, 0)]
        assert len(images[name]) == len(expected), name
        for got, want in zip(images[name], expected, strict=True):
            np.testing.assert_array_equal(got, want)


def test_lambda_takes_its_functions_by_the_params_setter_names(spark):
    from pyspark.sql import types as T

    from mmlspark.stages import Lambda

    df = spark.createDataFrame([(0, "guitars"), (1, "piano")], ["numbers", "words"])
    stage = (
        Lambda()
        .setTransformFunc(lambda d: d.select("numbers"))
        .setTransformSchemaFunc(lambda s: T.StructType([s["numbers"]]))
    )
    assert stage.transform(df).collect() == df.select("numbers").collect()
    assert stage.transformSchema(df.schema) == T.StructType([df.schema["numbers"]])
    assert stage.getTransformFunc() is stage.getTransform()
