"""ONNXModel against onnxruntime in Python (the reference) on models built with onnx.helper.

Tests taking `session` run on a classic and on a Spark Connect session from one body; they give
the model as a file (`modelLocation`), since `setModelPayload` needs the driver's JVM. The others
are classic only: they read the model back through the JVM stage (`getModelInputs`,
`setModelPayload`), change JVM settings, or start processes of their own.
"""

from __future__ import annotations

import json

import cv2
import numpy as np
import onnx
import onnx_models
import onnxruntime as ort
import pytest
from conftest import run_job
from onnx import TensorProto
from pyspark.errors import IllegalArgumentException
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import Row

from mmlspark.image import read_images
from mmlspark.onnx import ONNXModel, inspect_model
from mmlspark.opencv import ImageTransformer

RTOL = 1e-5


def reference(model: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def by_id(df) -> dict[int, Row]:
    return {r["id"]: r for r in df.collect()}


def model_file(tmp_path, model: bytes) -> str:
    path = tmp_path / "model.onnx"
    path.write_bytes(model)
    return str(path)


@pytest.mark.lines
def test_two_inputs_two_outputs_match_onnxruntime(session, tmp_path):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(37, 3)).astype(np.float32)
    b = rng.normal(size=(37, 3)).astype(np.float32)
    df = session.createDataFrame(
        [(i, a[i].tolist(), b[i].tolist()) for i in range(37)],
        "id int, a array<float>, b array<float>",
    ).repartition(3)
    model = ONNXModel(
        feedDict={"a": "a", "b": "b"},
        fetchDict={"s": "sum", "p": "product", "t": "total"},
        miniBatchSize=8,  # 37 rows in 3 partitions: full and partial batches
        modelLocation=model_file(tmp_path, onnx_models.two_in_two_out()),
    )
    rows = by_id(model.transform(df))
    expected = reference(onnx_models.two_in_two_out(), {"a": a, "b": b})
    assert len(rows) == 37
    for i in range(37):
        np.testing.assert_allclose(rows[i]["s"], expected["sum"][i], rtol=RTOL)
        np.testing.assert_allclose(rows[i]["p"], expected["product"][i], rtol=RTOL)
        np.testing.assert_allclose(rows[i]["t"], expected["total"][i], rtol=RTOL)
        assert rows[i]["onnxError"] is None


@pytest.mark.parametrize("labels", [[10, 20, 30], ["cat", "deer"]], ids=["int64", "string"])
@pytest.mark.lines
def test_zipmap_output_becomes_a_map_column(session, tmp_path, labels):
    model = onnx_models.zipmap_classifier(labels)
    (tmp_path / "zipmap.onnx").write_bytes(model)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(23, 4)).astype(np.float32)
    df = session.createDataFrame(
        [(i, [float(v) for v in row]) for i, row in enumerate(x)], "id int, x array<float>"
    )
    stage = ONNXModel(
        modelLocation=str(tmp_path / "zipmap.onnx"),
        feedDict={"x": "x"},
        fetchDict={"probability": "output_probability", "probabilities": "probabilities"},
        miniBatchSize=5,
    )
    out = stage.transform(df)
    key = "bigint" if isinstance(labels[0], int) else "string"
    assert out.schema["probability"].dataType.simpleString() == f"map<{key},float>"
    expected = reference(model, {"x": x})["output_probability"]
    rows = {r["id"]: r for r in out.collect()}
    for i, want in enumerate(expected):
        got = rows[i]["probability"]
        assert set(got) == set(want) == set(labels)
        for label in labels:
            assert got[label] == pytest.approx(want[label], rel=1e-6)
        # The map is the tensor before ZipMap, by label.
        assert [got[label] for label in labels] == pytest.approx(list(rows[i]["probabilities"]))


def test_intermediate_tensors_are_fetched_by_name(spark, tmp_path):
    from onnx.utils import extract_model

    rng = np.random.default_rng(8)
    x = rng.normal(size=(9, 3, 8, 8)).astype(np.float32)
    df = spark.createDataFrame(
        [(i, row.ravel().tolist()) for i, row in enumerate(x)], "id int, image array<float>"
    ).withMetadata("image", {"tensorShape": [3, 8, 8]})
    stage = ONNXModel(
        feedDict={"image": "image"},
        # 'features' is the output of a node inside the model; 'relu' another one
        fetchDict={"features": "features", "relu": "relu", "logits": "logits"},
    ).setModelPayload(onnx_models.small_cnn(size=8))
    rows = {r["id"]: r for r in stage.transform(df).collect()}
    (tmp_path / "full.onnx").write_bytes(onnx_models.small_cnn(size=8))
    extract_model(
        str(tmp_path / "full.onnx"), str(tmp_path / "cut.onnx"), ["image"],
        ["features", "relu", "logits"],
    )  # fmt: skip
    expected = reference((tmp_path / "cut.onnx").read_bytes(), {"image": x})
    for i in range(len(x)):
        for name in ("features", "relu", "logits"):
            np.testing.assert_allclose(
                np.array(rows[i][name]).ravel(), expected[name][i].ravel(), rtol=RTOL, atol=1e-6
            )
    with pytest.raises(IllegalArgumentException, match="no node or tensor 'nope'"):
        ONNXModel(feedDict={"image": "image"}, fetchDict={"x": "nope"}).setModelPayload(
            onnx_models.small_cnn(size=8)
        ).transform(df)


def test_batch_fixed_at_one_runs_row_by_row(spark):
    x = np.arange(20, dtype=np.float32).reshape(5, 4) / 3
    df = spark.createDataFrame([(i, x[i].tolist()) for i in range(5)], "id int, x array<float>")
    model = ONNXModel(inputCol="x", outputCol="y").setModelPayload(onnx_models.fixed_batch())
    assert model.getModelInputs()["x"]["shape"] == [1, 4]
    rows = by_id(model.transform(df))
    for i in range(5):
        expected = reference(onnx_models.fixed_batch(), {"x": x[i : i + 1]})["y"][0]
        np.testing.assert_allclose(rows[i]["y"], expected, rtol=RTOL)


TYPES = {
    # ONNX type: (numpy type, Spark column type of the input, values)
    TensorProto.UINT8: (np.uint8, "array<int>", [[0, 7, 255], [128, 1, 2]]),
    TensorProto.INT8: (np.int8, "array<tinyint>", [[-128, 0, 127], [5, -5, 1]]),
    TensorProto.INT16: (np.int16, "array<smallint>", [[-300, 0, 300], [1, 2, 3]]),
    TensorProto.INT32: (np.int32, "array<int>", [[-(2**31), 0, 2**31 - 1], [4, 5, 6]]),
    TensorProto.INT64: (np.int64, "array<bigint>", [[-(2**62), 0, 2**62 + 1], [7, 8, 9]]),
    TensorProto.DOUBLE: (np.float64, "array<double>", [[0.1, -2.5, 1e300], [1.0, 2.0, 3.0]]),
    TensorProto.FLOAT16: (np.float16, "array<float>", [[0.1, -2.5, 65504.0], [1e-3, 3.14159, 7.0]]),
    TensorProto.BOOL: (np.bool_, "array<boolean>", [[True, False, True], [False, False, True]]),
    TensorProto.STRING: (
        np.object_,
        "array<string>",
        [["cat", "fox", "empty"], ["deer", "", "cat"]],
    ),
}


@pytest.mark.parametrize("elem", list(TYPES), ids=lambda e: TensorProto.DataType.Name(e).lower())
@pytest.mark.lines
def test_every_element_type_matches_onnxruntime(session, tmp_path, elem):
    dtype, column, values = TYPES[elem]
    model_bytes = onnx_models.typed(elem)
    df = session.createDataFrame([(i, v) for i, v in enumerate(values)], f"id int, x {column}")
    second = "code" if elem == TensorProto.STRING else "as_float"
    model = ONNXModel(
        feedDict={"x": "x"},
        fetchDict={"same": "same", "second": second},
        modelLocation=model_file(tmp_path, model_bytes),
    )
    rows = by_id(model.transform(df))
    expected = reference(model_bytes, {"x": np.array(values, dtype=dtype)})
    for i in range(len(values)):
        assert rows[i]["onnxError"] is None
        same = np.array(rows[i]["same"], dtype=dtype)
        if elem == TensorProto.STRING:
            assert list(rows[i]["same"]) == list(expected["same"][i])
            assert list(rows[i]["second"]) == expected["code"][i].tolist()
        else:
            np.testing.assert_array_equal(same, expected["same"][i])
            np.testing.assert_allclose(rows[i]["second"], expected["as_float"][i], rtol=RTOL)


def test_uint8_from_binary_and_scalar_and_vector_columns(spark):
    from pyspark.ml.linalg import Vectors

    model_bytes = onnx_models.typed(TensorProto.UINT8)
    df = spark.createDataFrame([(0, bytearray([0, 200, 255]))], "id int, x binary")
    out = ONNXModel(inputCol="x", fetchDict={"same": "same"}).setModelPayload(model_bytes)
    assert out.transform(df).first()["same"] == [0, 200, 255]
    vectors = spark.createDataFrame([(0, Vectors.dense([1.0, 2.0, 3.0]))], ["id", "a"])
    total = ONNXModel(feedDict={"a": "a", "b": "a"}, fetchDict={"t": "total", "s": "sum"})
    row = total.setModelPayload(onnx_models.two_in_two_out()).transform(vectors).first()
    assert row["t"] == 6.0 and row["s"] == [2.0, 4.0, 6.0]


def _write_images(folder, count: int, seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    folder.mkdir()
    images = []
    for i in range(count):
        image = rng.integers(0, 256, size=(40 + i, 50, 3), dtype=np.uint8)
        cv2.imwrite(str(folder / f"img{i:02d}.png"), image)
        images.append(image)
    return images


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _reference_tensor(bgr: np.ndarray) -> np.ndarray:
    rgb = cv2.resize(bgr, (32, 32), interpolation=cv2.INTER_LINEAR)[:, :, ::-1].astype(np.float32)
    scaled = rgb * np.float32(1 / 255)
    return ((scaled - np.float32(MEAN)) / np.float32(STD)).astype(np.float32).transpose(2, 0, 1)


def _cnn_pipeline() -> Pipeline:
    transformer = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .resize(32, 32)
        .normalize(mean=MEAN, std=STD, colorScaleFactor=1 / 255)
    )
    model = ONNXModel(
        feedDict={"image": "tensor"},
        fetchDict={"logits": "logits"},
        softMaxDict={"logits": "probability"},
        argMaxDict={"logits": "prediction"},
    ).setModelPayload(onnx_models.small_cnn())
    return Pipeline(stages=[transformer, model])


@pytest.mark.lines
def test_small_cnn_on_image_tensors_saved_and_reloaded(spark, tmp_path):
    images = _write_images(tmp_path / "photos", 12)
    (tmp_path / "photos" / "broken.png").write_bytes(b"not an image")
    df = read_images(spark, str(tmp_path / "photos"))
    fitted = _cnn_pipeline().fit(df)
    fitted.write().overwrite().save(str(tmp_path / "pipeline"))
    reloaded = PipelineModel.load(str(tmp_path / "pipeline"))
    batch = np.stack([_reference_tensor(im) for im in images])
    logits = reference(onnx_models.small_cnn(), {"image": batch})["logits"]
    for pipeline in (fitted, reloaded):
        rows = {r["path"].rsplit("/", 1)[-1]: r for r in pipeline.transform(df).collect()}
        assert len(rows) == 13
        assert rows["broken.png"]["logits"] is None
        assert "null" in rows["broken.png"]["onnxError"]
        for i in range(12):
            row = rows[f"img{i:02d}.png"]
            np.testing.assert_allclose(row["logits"], logits[i], rtol=RTOL, atol=1e-6)
            softmax = (
                np.exp(logits[i] - logits[i].max()) / np.exp(logits[i] - logits[i].max()).sum()
            )
            np.testing.assert_allclose(row["probability"], softmax, rtol=1e-5)
            assert row["prediction"] == float(np.argmax(logits[i]))
    # The model travels as a plain ONNX file inside the stage's directory.
    saved = list((tmp_path / "pipeline" / "stages").glob("1_*/model.onnx"))
    assert len(saved) == 1 and saved[0].read_bytes() == onnx_models.small_cnn()


@pytest.mark.lines
def test_bad_rows_keep_their_place_with_an_error(session, tmp_path):
    df = session.createDataFrame(
        [
            (0, [1.0, 2.0, 3.0]),
            (1, None),
            (2, [1.0, 2.0]),
            (3, [4.0, 5.0, 6.0]),
            (4, [1.0, None, 3.0]),
        ],
        "id int, a array<float>",
    )
    model = ONNXModel(
        feedDict={"a": "a", "b": "a"},
        fetchDict={"s": "sum"},
        miniBatchSize=4,
        modelLocation=model_file(tmp_path, onnx_models.two_in_two_out()),
    )
    rows = by_id(model.transform(df))
    assert len(rows) == 5
    assert rows[0]["s"] == [2.0, 4.0, 6.0] and rows[3]["s"] == [8.0, 10.0, 12.0]
    assert rows[4]["s"] is None and rows[4]["onnxError"] == "array element 1 is null"
    assert rows[4]["a"] == [1.0, None, 3.0]
    assert rows[1]["s"] is None and rows[1]["onnxError"] == "input column 'a' is null"
    assert rows[2]["s"] is None and "holds 2 values" in rows[2]["onnxError"]


def test_misconfiguration_fails_before_any_job(spark):
    df = spark.createDataFrame([(0, [1.0, 2.0, 3.0])], "id int, a array<float>")
    model = ONNXModel(feedDict={"a": "a", "nope": "a"}, fetchDict={"s": "sum"})
    model.setModelPayload(onnx_models.two_in_two_out())
    with pytest.raises(IllegalArgumentException, match="model input 'nope'"):
        model.transform(df)
    with pytest.raises(IllegalArgumentException, match="not a model ONNX Runtime"):
        ONNXModel(inputCol="a", outputCol="o").setModelPayload(b"garbage").transform(df)
    with pytest.raises(ValueError, match="deviceType"):
        ONNXModel(deviceType="tpu")
    with pytest.raises(ValueError, match="feedDict"):
        ONNXModel().setFeedDict("[1]")


@pytest.mark.parametrize(
    "make",
    [
        onnx_models.two_in_two_out,
        onnx_models.fixed_batch,
        onnx_models.small_cnn,
        lambda: onnx_models.typed(TensorProto.FLOAT16),
        lambda: onnx_models.typed(TensorProto.STRING),
    ],
    ids=["pairs", "fixed", "cnn", "float16", "string"],
)
def test_model_introspection_agrees_with_the_onnx_file(spark, make, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(make())
    model = ONNXModel(modelLocation=str(path))
    expected = inspect_model(path)
    assert model.getModelInputs() == expected["inputs"]
    assert model.getModelOutputs() == expected["outputs"]
    assert inspect_model(make()) == expected  # bytes work too


def test_python_built_equals_scala_built_after_save_and_load(spark, tmp_path):
    path = tmp_path / "pairs.onnx"
    path.write_bytes(onnx_models.two_in_two_out())
    py = ONNXModel(
        modelLocation=str(path),
        feedDict={"a": "a", "b": "a"},
        fetchDict={"s": "sum"},
        miniBatchSize=3,
        argMaxDict={"s": "best"},
    )
    jvm = spark._jvm.mmlspark.onnx.ONNXModel()
    jvm.setModelLocation(str(path)).setFeedDict(json.dumps({"a": "a", "b": "a"}))
    jvm.setFetchDict(json.dumps({"s": "sum"})).setMiniBatchSize(3)
    jvm.setArgMaxDict(json.dumps({"s": "best"}))
    py.save(str(tmp_path / "py"))
    jvm.save(str(tmp_path / "jvm"))
    from_py, from_jvm = ONNXModel.load(str(tmp_path / "py")), ONNXModel.load(str(tmp_path / "jvm"))
    for param in py.params:
        assert from_py.isDefined(param.name) == from_jvm.isDefined(param.name)
        if py.isDefined(param):
            assert from_py.getOrDefault(param.name) == from_jvm.getOrDefault(param.name)
    df = spark.createDataFrame(
        [(i, [float(i), 2.0 * i, -1.0]) for i in range(7)], "id int, a array<float>"
    )
    out_py = sorted(map(str, from_py.transform(df).collect()))
    out_jvm = sorted(map(str, from_jvm.transform(df).collect()))
    assert out_py == out_jvm
    assert from_py.getModelPayload() == onnx_models.two_in_two_out()


def test_image_featurizer_then_logistic_regression_saved_and_reloaded(spark, tmp_path):
    import onnx
    from onnx.utils import extract_model
    from pyspark.ml.classification import LogisticRegression

    from mmlspark.onnx import ImageFeaturizer

    images = _write_images(tmp_path / "photos", 10, seed=11)
    # One undecodable file: ImageFeaturizer drops its row (dropNa, as in SynapseML), so the
    # following fit sees only vectors.
    (tmp_path / "photos" / "img99.png").write_bytes(b"not an image")
    df = read_images(spark, str(tmp_path / "photos")).selectExpr(
        "*", "cast(substring(path, -5, 1) as int) % 2 as label"
    )
    featurizer = ImageFeaturizer(
        featureTensorName="features", imageHeight=32, imageWidth=32
    ).setModelPayload(onnx_models.small_cnn())
    pipeline = Pipeline(stages=[featurizer, LogisticRegression(maxIter=5)])
    fitted = pipeline.fit(df)
    fitted.write().overwrite().save(str(tmp_path / "pipeline"))
    reloaded = PipelineModel.load(str(tmp_path / "pipeline"))

    # Reference: onnx's own extractor cuts the model; onnxruntime runs it on numpy tensors.
    (tmp_path / "full.onnx").write_bytes(onnx_models.small_cnn())
    extract_model(str(tmp_path / "full.onnx"), str(tmp_path / "cut.onnx"), ["image"], ["features"])
    cut = onnx.load(str(tmp_path / "cut.onnx")).SerializeToString()
    batch = np.stack([_reference_tensor(im) for im in images])
    expected = reference(cut, {"image": batch})["features"]

    outputs = [
        {r["path"].rsplit("/", 1)[-1]: r for r in p.transform(df).collect()}
        for p in (fitted, reloaded)
    ]
    assert sorted(outputs[0]) == sorted(outputs[1]) == [f"img{i:02d}.png" for i in range(10)]
    for name, row in outputs[0].items():
        i = int(name[3:5])
        np.testing.assert_allclose(row["features"].toArray(), expected[i], rtol=RTOL, atol=1e-6)
        assert row["featurizeError"] is None
        assert outputs[1][name]["features"] == row["features"]
        assert outputs[1][name]["prediction"] == row["prediction"]
        assert outputs[1][name]["probability"] == row["probability"]
    assert isinstance(reloaded.stages[0], ImageFeaturizer)
    assert reloaded.stages[0].getModelPayload() == onnx_models.small_cnn()


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_image_featurizer_takes_means_and_stds_in_its_tensor_channel_order(spark, tmp_path, order):
    # Means and stds given in BGR order for a BGR tensor gave wrong features (silently).
    from mmlspark.onnx import ImageFeaturizer

    images = _write_images(tmp_path / "photos", 4, seed=3)
    df = read_images(spark, str(tmp_path / "photos"))
    mean, std = [0.3, 0.5, 0.7], [0.2, 0.25, 0.4]  # distinct per channel, in `order`
    featurizer = ImageFeaturizer(
        featureTensorName="logits", imageHeight=32, imageWidth=32, tensorChannelOrder=order,
        channelMeans=mean, channelStds=std,
    ).setModelPayload(onnx_models.small_cnn())  # fmt: skip

    def tensor(bgr: np.ndarray) -> np.ndarray:
        resized = cv2.resize(bgr, (32, 32), interpolation=cv2.INTER_LINEAR).astype(np.float32)
        ordered = resized if order == "BGR" else resized[:, :, ::-1]
        scaled = ordered * np.float32(1 / 255)
        return ((scaled - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)

    expected = reference(
        onnx_models.small_cnn(), {"image": np.stack([tensor(im) for im in images])}
    )
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in featurizer.transform(df).collect()}
    for name, row in rows.items():
        np.testing.assert_allclose(
            row["features"].toArray(), expected["logits"][int(name[3:5])], rtol=RTOL, atol=1e-6
        )


def test_a_channels_first_tensor_is_refused_by_a_channels_last_model(spark, tmp_path):
    # Same total size, other layout: it used to be reshaped silently and give wrong outputs.
    _write_images(tmp_path / "photos", 2, seed=4)
    tensors = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .resize(8, 8)
        .transform(read_images(spark, str(tmp_path / "photos")))
    )
    model = ONNXModel(inputCol="tensor", outputCol="y").setModelPayload(onnx_models.channels_last())
    with pytest.raises(IllegalArgumentException) as refused:
        model.transform(tensors)  # before any job: from the column's tensorShape metadata
    message = str(refused.value)
    assert "[3, 8, 8]" in message and "[8, 8, 3]" in message and "layout" in message

    # A nested array of the transposed shape, with no metadata, fails its row and says why.
    chw = np.arange(3 * 8 * 8, dtype=np.float32).reshape(3, 8, 8)
    df = spark.createDataFrame([(0, chw.tolist())], "id int, tensor array<array<array<float>>>")
    row = model.transform(df).first()
    assert row["y"] is None and "another order" in row["onnxError"]
    # The layout the model takes goes through, equal to onnxruntime's output.
    hwc = spark.createDataFrame(
        [(0, chw.transpose(1, 2, 0).tolist())], "id int, tensor array<array<array<float>>>"
    )
    expected = reference(onnx_models.channels_last(), {"x": chw.transpose(1, 2, 0)[None]})["y"]
    np.testing.assert_allclose(model.transform(hwc).first()["y"], expected[0], rtol=RTOL)


def test_a_channels_last_tensor_is_refused_by_a_model_with_free_height_and_width(spark):
    # [N, 3, H, W] with H and W free: an HWC tensor does not fit, its transpose does.
    from pyspark.sql import functions as F

    hwc = np.arange(8 * 10 * 3, dtype=np.float32).reshape(8, 10, 3)
    df = spark.createDataFrame([(0, hwc.tolist())], "id int, image array<array<array<float>>>")
    model = ONNXModel(inputCol="image", outputCol="logits").setModelPayload(onnx_models.small_cnn())
    described = df.select(F.col("image").alias("image", metadata={"tensorShape": [8, 10, 3]}))
    with pytest.raises(IllegalArgumentException) as refused:
        model.transform(described)  # before any job: from the column's tensorShape metadata
    message = str(refused.value)
    assert "[8, 10, 3]" in message and "[3, ?, ?]" in message and "layout" in message
    row = model.transform(df).first()  # no metadata: the row fails and says why
    assert row["logits"] is None and "another order" in row["onnxError"]
    chw = spark.createDataFrame([(0, hwc.transpose(2, 0, 1).tolist())], df.schema)
    expected = reference(onnx_models.small_cnn(), {"image": hwc.transpose(2, 0, 1)[None]})
    np.testing.assert_allclose(
        model.transform(chw).first()["logits"], expected["logits"][0], rtol=RTOL, atol=1e-6
    )


def test_nested_array_column_feeds_an_image_model(spark):
    rng = np.random.default_rng(5)
    images = rng.normal(size=(6, 3, 8, 10)).astype(np.float32)
    df = spark.createDataFrame(
        [(i, images[i].tolist()) for i in range(6)], "id int, image array<array<array<float>>>"
    )
    model = ONNXModel(inputCol="image", outputCol="logits", miniBatchSize=4)
    rows = by_id(model.setModelPayload(onnx_models.small_cnn()).transform(df))
    expected = reference(onnx_models.small_cnn(), {"image": images})["logits"]
    for i in range(6):
        np.testing.assert_allclose(rows[i]["logits"], expected[i], rtol=RTOL, atol=1e-6)
        assert rows[i]["image"] == images[i].tolist()  # passed through unchanged
    ragged = spark.createDataFrame([(0, [[[1.0, 2.0]], [[1.0]], [[3.0, 4.0]]])], df.schema)
    assert "ragged" in model.transform(ragged).first()["onnxError"]


# Bounded memory per row: batches sized by the rows present and split by a byte budget, outputs
# over a per-row limit refused before they reach the JVM heap.

MAX_BATCH = "spark.mmlspark.onnx.maxBatchBytes"
MAX_OUTPUT = "spark.mmlspark.onnx.maxOutputBytesPerRow"


@pytest.fixture
def onnx_settings(spark):
    """Sets ONNXModel's Spark settings for one test."""
    touched = []

    def set_(key: str, value: str) -> None:
        touched.append(key)
        spark.conf.set(key, value)

    yield set_
    for key in touched:
        spark.conf.unset(key)


@pytest.mark.lines
def test_batches_split_to_fit_the_byte_budget(spark, onnx_settings):
    # 10 rows of 256 floats (1 KiB each, plus 8 bytes of outputs) in one partition.
    x = np.random.default_rng(2).normal(size=(10, 256)).astype(np.float32)
    df = spark.createDataFrame(
        [(i, x[i].tolist()) for i in range(10)], "id int, x array<float>"
    ).coalesce(1)
    model_bytes = onnx_models.batch_probe([256])
    model = ONNXModel(inputCol="x", fetchDict={"rows": "rows", "mean": "mean"}, miniBatchSize=64)
    model.setModelPayload(model_bytes)
    expected = reference(model_bytes, {"x": x})["mean"]

    def batches() -> list[float]:
        rows = by_id(model.transform(df))
        assert len(rows) == 10
        for i in range(10):
            assert rows[i]["onnxError"] is None
            np.testing.assert_allclose(rows[i]["mean"], expected[i], rtol=RTOL, atol=1e-7)
        return [rows[i]["rows"] for i in range(10)]

    assert batches() == [10.0] * 10  # the default budget holds them all: one run
    onnx_settings(MAX_BATCH, str(3 * 1032))
    assert batches() == [3.0] * 9 + [1.0]  # three rows per run, then the one left
    onnx_settings("spark.mmlspark.onnx.padBatches", "true")
    assert batches() == [3.0] * 10  # the row left runs padded to a full run, with its own mean
    onnx_settings("spark.mmlspark.onnx.padBatches", "false")
    onnx_settings(MAX_BATCH, "1")
    assert batches() == [1.0] * 10  # a row over the budget runs by itself
    for bad in ("lots", "0", "4g"):
        onnx_settings(MAX_BATCH, bad)
        with pytest.raises(IllegalArgumentException, match=MAX_BATCH):
            model.transform(df)


def _wide_rows(spark):
    return spark.createDataFrame(
        [(0, [1.0]), (1, None), (2, [2.0]), (3, [3.0])], "id int, x array<float>"
    ).coalesce(1)


@pytest.mark.parametrize("fixed", [True, False], ids=["declared", "dynamic"])
def test_output_over_the_per_row_limit_is_each_rows_error(spark, fixed):
    # 400 MiB per row: with the default limit (64 MiB) every row is refused with the sizes and
    # the setting named; the null row keeps its own error; rows in equal rows out.
    model = ONNXModel(inputCol="x", outputCol="y", miniBatchSize=8)
    rows = by_id(
        model.setModelPayload(onnx_models.wide_output(100 << 20, fixed)).transform(
            _wide_rows(spark)
        )
    )
    assert sorted(rows) == [0, 1, 2, 3]
    message = (
        "output 'y' is 400.0 MiB per row, over the limit of 64.0 MiB "
        "(spark.mmlspark.onnx.maxOutputBytesPerRow)"
    )
    for i in (0, 2, 3):
        assert rows[i]["y"] is None and rows[i]["onnxError"] == message
    assert rows[1]["onnxError"] == "input column 'x' is null"


def test_output_limit_is_a_setting(spark, onnx_settings):
    df = _wide_rows(spark)
    onnx_settings(MAX_OUTPUT, "1k")
    model = ONNXModel(inputCol="x", outputCol="y")
    over = by_id(model.setModelPayload(onnx_models.wide_output(300, False)).transform(df))
    assert over[0]["onnxError"] == (
        "output 'y' is 1.2 KiB per row, over the limit of 1.0 KiB "
        "(spark.mmlspark.onnx.maxOutputBytesPerRow)"
    )
    model_bytes = onnx_models.wide_output(200, False)
    under = by_id(model.setModelPayload(model_bytes).transform(df))
    expected = reference(model_bytes, {"x": np.array([[1.0], [2.0], [3.0]], np.float32)})["y"]
    for i, k in ((0, 0), (2, 1), (3, 2)):
        assert under[i]["onnxError"] is None
        np.testing.assert_array_equal(under[i]["y"], expected[k])


# Persistence: a saved stage is self-contained and runs only the model saved with it.


def test_external_data_weights_are_saved_beside_the_model(spark, tmp_path):
    source = onnx_models.save_with_external_data(onnx_models.small_cnn(), tmp_path / "src")
    images = np.random.default_rng(4).normal(size=(5, 3, 8, 8)).astype(np.float32)
    df = spark.createDataFrame(
        [(i, images[i].tolist()) for i in range(5)], "id int, image array<array<array<float>>>"
    )
    expected = reference(onnx_models.small_cnn(), {"image": images})["logits"]

    def check(pipeline) -> None:
        rows = by_id(pipeline.transform(df))
        for i in range(5):
            assert rows[i]["onnxError"] is None
            np.testing.assert_allclose(rows[i]["logits"], expected[i], rtol=RTOL, atol=1e-6)

    model = ONNXModel(modelLocation=str(source), inputCol="image", outputCol="logits")
    fitted = Pipeline(stages=[model]).fit(df)
    check(fitted)
    fitted.write().save(str(tmp_path / "first"))
    (stage_dir,) = (tmp_path / "first" / "stages").glob("0_*")
    weights = (tmp_path / "src" / "weights.bin").read_bytes()
    assert (stage_dir / "weights.bin").read_bytes() == weights
    # The original files are gone: the save alone runs, and saves again with its weights.
    for f in (tmp_path / "src").iterdir():
        f.unlink()
    loaded = PipelineModel.load(str(tmp_path / "first"))
    check(loaded)
    loaded.write().save(str(tmp_path / "second"))
    (second_dir,) = (tmp_path / "second" / "stages").glob("0_*")
    assert (second_dir / "weights.bin").read_bytes() == weights
    check(PipelineModel.load(str(tmp_path / "second")))
    # A save missing its weights fails to load, naming the file.
    (stage_dir / "weights.bin").unlink()
    with pytest.raises(Exception, match=r"weights\.bin', which is missing"):
        PipelineModel.load(str(tmp_path / "first"))


def test_external_data_outside_the_model_directory_is_refused(spark, tmp_path):
    proto = onnx.load_from_string(onnx_models.small_cnn())
    tensor = proto.graph.initializer[0]
    tensor.data_location = TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(IllegalArgumentException, match=r"'\.\./secret\.bin', which is not a file"):
        ONNXModel(modelLocation=str(tmp_path / "m.onnx")).getModelInputs()


def test_a_saved_stage_never_falls_back_to_its_model_location(spark, tmp_path):
    path = tmp_path / "pairs.onnx"
    path.write_bytes(onnx_models.two_in_two_out())
    model = ONNXModel(
        modelLocation=str(path), feedDict={"a": "a", "b": "a"}, fetchDict={"s": "sum"}
    )
    df = spark.createDataFrame([(0, [1.0, 2.0, 3.0])], "id int, a array<float>")
    Pipeline(stages=[model]).fit(df).write().save(str(tmp_path / "saved"))
    (saved,) = (tmp_path / "saved" / "stages").glob("0_*/model.onnx")
    saved.write_bytes(b"")
    with pytest.raises(Exception, match="model.onnx' is empty, but the stage was saved with"):
        PipelineModel.load(str(tmp_path / "saved"))
    saved.unlink()  # the file at modelLocation is still there: it must not be used
    with pytest.raises(Exception, match=r"its model file '.*0_[^']*/model\.onnx' is missing"):
        PipelineModel.load(str(tmp_path / "saved"))


# A JVM of their own: a direct memory limit, and a JVM that exits under a running model.

# What the jobs below that compare with onnxruntime import (run_job passes the tests folder).
JOB_IMPORTS = """
import sys

import numpy as np
import onnxruntime as ort

sys.path.insert(0, sys.argv[2])
import mmlspark
import onnx_models
from mmlspark.onnx import ONNXModel
"""

DIRECT_MEMORY_JOB = (
    JOB_IMPORTS
    + """spark = mmlspark.session(
    "local[1]",
    {
        "spark.ui.enabled": "false",
        # Less direct memory than a full mini-batch of these rows (64 x 24 MiB) would take.
        "spark.driver.extraJavaOptions": "-XX:MaxDirectMemorySize=160m",
        "spark.mmlspark.onnx.maxBatchBytes": "1g",
    },
)
shape = [3, 1448, 1448]
size = 3 * 1448 * 1448
model_bytes = onnx_models.batch_probe(shape)
model = ONNXModel(inputCol="x", fetchDict={"rows": "rows", "mean": "mean"}, miniBatchSize=64)
model.setModelPayload(model_bytes)
reference = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def scored(count):
    # Row i holds the pixel value 60 + i everywhere (bytes as uint8, fed as float).
    df = spark.range(count).selectExpr(
        "int(id) as id", f"cast(repeat(char(int(60 + id)), {size}) as binary) as x"
    )
    rows = {r["id"]: r for r in model.transform(df.coalesce(1)).drop("x").collect()}
    assert sorted(rows) == list(range(count)), sorted(rows)
    for i, row in rows.items():
        assert row["onnxError"] is None, row["onnxError"]
        x = np.full([1, *shape], 60 + i, dtype=np.float32)
        expected = reference.run(["mean"], {"x": x})[0][0]
        np.testing.assert_allclose(row["mean"], expected, rtol=1e-5)
    return [rows[i]["rows"] for i in range(count)]


# 4 rows (96 MiB) fit: one run, buffers sized for 4 rows, not for miniBatchSize.
assert scored(4) == [4.0] * 4
# 12 rows (288 MiB) do not: the allocation fails, and the rows run one by one instead.
assert scored(12) == [1.0] * 12
print("ok")
"""
)


@pytest.mark.system
def test_buffers_fit_the_rows_present_and_a_failed_allocation_fails_no_row(tmp_path):
    result = run_job(tmp_path, DIRECT_MEMORY_JOB, "")
    assert result.stdout.strip().endswith("ok")


CANCEL_JOB = """
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, sys.argv[2])
import mmlspark
import onnx_models
from mmlspark.onnx import ONNXModel

temp = Path(sys.argv[1])
spark = mmlspark.session(
    "local[2]",
    {
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={temp}",
        "spark.mmlspark.onnx.inferenceService": os.environ["SERVICE"],
    },
)
jvm = spark.sparkContext._jvm
pid = jvm.java.lang.ProcessHandle.current().pid()
runs = jvm.mmlspark.onnx.OrtRuns
tick = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def busy_rate():
    # The JVM's CPU seconds per second of wall time while it uses its next CPU second: with the
    # model computing on a core, that second comes in about one second, however loaded the machine
    # (the deadline only bounds a failure).
    start, began = cpu_seconds(), time.monotonic()
    while cpu_seconds() - start < 1.0:
        assert time.monotonic() - began < 120, "the JVM used under 1 s of CPU in 120 s"
        time.sleep(0.05)
    return (cpu_seconds() - start) / (time.monotonic() - began)


def idle_rate(seconds):
    # Nothing marks "nothing of the run is left computing" (a native run, spinning threads): this
    # one is a window of wall time, over which an idle JVM uses about a hundredth of a core.
    start = cpu_seconds()
    time.sleep(seconds)
    return (cpu_seconds() - start) / seconds


df = spark.createDataFrame([(0, [1.0])], "id int, x array<float>")
model = ONNXModel(inputCol="x", outputCol="y").setModelPayload(onnx_models.endless_loop())
errors = []


def score():
    try:
        model.transform(df).collect()
    except Exception as e:
        errors.append(str(e))


def start_scoring():
    thread = threading.Thread(target=score, daemon=True)
    thread.start()
    deadline = time.time() + 120
    while runs.running() == 0:
        assert time.time() < deadline, "the model never started"
        time.sleep(0.1)
    return thread


thread = start_scoring()
busy = busy_rate()
spark.sparkContext.cancelAllJobs()
thread.join(60)
assert not thread.is_alive() and errors and "cancel" in errors[0].lower(), errors
# The model never ends on its own, so any stop is the cancel's doing; the deadline only bounds a
# failure (the run is terminated within 100 ms of its task's end).
deadline = time.monotonic() + 60
while runs.running() > 0:
    assert time.monotonic() < deadline, "the cancelled run still runs"
    time.sleep(0.05)
idle = idle_rate(2)
assert idle < 0.25, f"after cancelling, the JVM used {idle:.2f} s of CPU per second"
# The CPU the model used is gone with it (a rate, not an amount: a loaded machine lends it less).
assert busy > 4 * idle, f"the running model used {busy:.2f} s of CPU per second, idle {idle:.2f}"
print(f"busy {busy:.2f}, idle {idle:.2f} s of CPU per second")

# The JVM exits (its Python driver closes the pipe) while a run is in flight.
start_scoring()
gateway = spark.sparkContext._gateway.proc
gateway.stdin.close()
code = gateway.wait(60)
print(f"JVM exit code {code}")
sys.stdout.flush()
os._exit(0 if code == 0 else 3)
"""


@pytest.mark.system
@pytest.mark.parametrize("service", ["true", "false"], ids=["inference-service", "tasks"])
def test_cancelled_runs_stop_and_the_jvm_exits_cleanly(tmp_path, service):
    temp = tmp_path / "jvm-temp"
    temp.mkdir()
    result = run_job(tmp_path, CANCEL_JOB, str(temp), env={"SERVICE": service})
    assert "JVM exit code 0" in result.stdout
    # No native crash at exit, and no temporary directory left behind.
    assert not list(tmp_path.glob("hs_err_pid*.log"))
    assert not list(temp.glob("mmlspark-onnx*"))


SERVICE_JOB = (
    JOB_IMPORTS
    + """spark = mmlspark.session(
    "local[4]",
    {
        "spark.ui.enabled": "false",
        # On: by default (auto) it is off on a CPU.
        "spark.mmlspark.onnx.inferenceService": "true",
        "spark.mmlspark.onnx.inferenceService.maxWait": "1s",
    },
)
jvm = spark.sparkContext._jvm
service = jvm.mmlspark.onnx.InferenceService
sessions = jvm.mmlspark.onnx.OrtSessions
model_bytes = onnx_models.small_cnn(size=32)
images = np.random.default_rng(3).random((64, 3, 32, 32), dtype=np.float32)
df = spark.createDataFrame(
    [(i, images[i].tolist()) for i in range(64)], "id int, image array<array<array<float>>>"
).repartition(16)
# Two tasks' rows fill a batch: the service runs it once they are in, and waits (up to maxWait)
# only for a second task's rows.
model = ONNXModel(feedDict={"image": "image"}, fetchDict={"logits": "logits"}, miniBatchSize=8)
model.setModelPayload(model_bytes)
expected = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(
    None, {"image": images}
)[0]


def scored():
    rows = model.transform(df).select("id", "logits", "onnxError").collect()
    assert sorted(r.id for r in rows) == list(range(64))
    assert all(r.onnxError is None for r in rows), [r.onnxError for r in rows][:3]
    return np.array([r.logits for r in sorted(rows, key=lambda r: r.id)], dtype=np.float32)


created = sessions.created()
service.resetLargestBatch()
on = scored()
# 16 tasks of 4 rows, 4 at a time: the service filled batches with rows of several tasks.
largest = service.largestBatch()
assert largest > 4, largest
assert sessions.created() - created == 1
spark.conf.set("spark.mmlspark.onnx.inferenceService", "false")
off = scored()
np.testing.assert_allclose(on, expected, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(off, expected, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(on, off, rtol=1e-5, atol=1e-6)
print(f"ok: largest batch {largest} rows")
"""
)


@pytest.mark.system
def test_the_inference_service_batches_rows_of_four_tasks_with_the_same_results(tmp_path):
    result = run_job(tmp_path, SERVICE_JOB, "")
    assert "ok: largest batch" in result.stdout


KILLED_TASK_JOB = (
    JOB_IMPORTS
    + """import os
import threading
import time

from pyspark.sql import functions as F

spark = mmlspark.session(
    "local[2]",
    {
        "spark.ui.enabled": "false",
        "spark.mmlspark.onnx.inferenceService": "true",  # by default (auto) off on a CPU
        "spark.mmlspark.onnx.inferenceService.maxWait": "10s",
    },
)
sc = spark.sparkContext
jvm = sc._jvm
service = jvm.mmlspark.onnx.InferenceService
runs = jvm.mmlspark.onnx.OrtRuns
trips = int(sys.argv[1])
# 6 rows fill a batch: the service runs the two tasks' rows once both tasks' are in. (It waits
# for the second task's rows, up to maxWait, as a second task holds it.)
model = ONNXModel(inputCol="x", outputCol="y", miniBatchSize=6)
model.setModelPayload(onnx_models.endless_loop(trips))
# Both tasks hold the service (a task takes it at its first row) before either hands its 3 rows
# over (after its last). A task's first row comes straight from the driver's data; Spark starts
# the Python UDF of its other two only once the ONNX stage asks for its second row, so the UDF
# reaching a task's second row says that the task holds the service. (The UDF's results reach
# the JVM only at the end of its input: a first row through it would not.) Each task's last row
# waits in the UDF until both tasks hold the service.
gate = os.path.abspath("gate")
os.makedirs(gate)


def through_gate(i, v):
    open(os.path.join(gate, f"row-{i}"), "w").close()
    if i % 10 == 2:
        deadline = time.monotonic() + 120
        while not all(os.path.exists(os.path.join(gate, f"row-{k}")) for k in (1, 11)):
            assert time.monotonic() < deadline, "the other task never took the service"
            time.sleep(0.05)
    return v


gated = F.udf(through_gate, "array<float>")


def three_rows(first):
    schema = "id int, x array<float>"
    head = spark.createDataFrame([(first, [float(first)])], schema)
    rest = spark.createDataFrame([(first + i, [float(first + i)]) for i in (1, 2)], schema)
    # One partition, the first row first: coalesce keeps the order of the union's partitions.
    return head.union(rest.select("id", gated("id", "x").alias("x"))).coalesce(1)


results, errors = {}, {}


def score(group, first):
    sc.setJobGroup(group, group, interruptOnCancel=True)
    try:
        rows = model.transform(three_rows(first)).select("id", "y", "onnxError").collect()
        results[group] = sorted((r.id, r.y, r.onnxError) for r in rows)
    except Exception as e:
        errors[group] = str(e)


def expected(first):
    return [(first + i, [float(first + i + trips)], None) for i in range(3)]


service.resetLargestBatch()
threads = [threading.Thread(target=score, args=g) for g in (("killed", 0), ("kept", 10))]
for thread in threads:
    thread.start()
deadline = time.monotonic() + 120
while not (runs.running() > 0 and service.largestBatch() == 6):
    assert time.monotonic() < deadline, f"no shared batch ran: largest {service.largestBatch()}"
    time.sleep(0.02)
# The shared batch is running: kill one of its two tasks.
running = time.monotonic()
sc.cancelJobGroup("killed")
killed, kept = threads
killed.join(120)
stopped = time.monotonic()
assert not killed.is_alive()
# The killed task stopped waiting at once: it ended before its batch did (a run of `trips` takes
# seconds; the batch's end is the event that bounds "at once").
assert runs.running() > 0, "the killed task ended only once its batch had"
kept.join(120)
assert not kept.is_alive()
ran = time.monotonic()
assert set(errors) == {"killed"} and "cancel" in errors["killed"].lower(), errors
# The other task's rows of that batch come back, right.
assert results["kept"] == expected(10), results
assert service.batchesRun() >= 1
deadline = time.monotonic() + 60
while runs.running() > 0:
    assert time.monotonic() < deadline, "a run is left behind"
    time.sleep(0.05)
# The killed task's rows, run again (as Spark reruns a killed attempt), come back right too.
score("again", 0)
assert results["again"] == expected(0), (results, errors)
print(
    f"ok: killed one task of a shared batch: it stopped {stopped - running:.2f} s after the cancel,"
    f" the batch ran {ran - running:.2f} s more"
)
"""
)


@pytest.mark.system
def test_a_task_killed_while_its_rows_share_a_batch_leaves_the_other_task_s_rows_right(tmp_path):
    """Rows of two jobs' tasks run in one batch of the inference service; one job is cancelled
    (its task killed) while the batch runs. The other task still gets its rows' results (the
    batch is not stopped for it), no run is left running, and the service serves the
    killed rows again afterwards."""
    # 2 million trips: a run of about 2 s here, 20 times what the kill took to end the task.
    result = run_job(tmp_path, KILLED_TASK_JOB, str(2_000_000))
    assert "ok: killed one task of a shared batch" in result.stdout


SERVICE_SIZES_JOB = """
import sys

sys.path.insert(0, sys.argv[2])
import mmlspark
import onnx_models
from mmlspark.onnx import ONNXModel

workers = []
# Two local sessions, one after the other, in one JVM (as a notebook that restarts its session).
for master in ("local[1]", "local[2]"):
    # The service on: by default (auto) it is off on a CPU.
    spark = mmlspark.session(
        master, {"spark.ui.enabled": "false", "spark.mmlspark.onnx.inferenceService": "true"}
    )
    model = ONNXModel(inputCol="x", fetchDict={"rows": "rows", "mean": "mean"})
    model.setModelPayload(onnx_models.batch_probe([2]))
    df = spark.createDataFrame([(i, [float(i), 1.0]) for i in range(8)], "id int, x array<float>")
    means = sorted(r.mean for r in model.transform(df.repartition(2)).collect())
    assert means == [(i + 1.0) / 2 for i in range(8)], means
    jvm = spark.sparkContext._jvm
    keys = jvm.mmlspark.onnx.OrtSessions.openKeys()
    found = [jvm.mmlspark.onnx.InferenceService.workersOf(keys.apply(i)).toString()
             for i in range(keys.size())]
    workers.append(found)
    spark.stop()
print("workers", workers)
# local[2] gets a service with two workers, not the one-worker service local[1] left behind.
assert workers[0] == ["List(1)"], workers
assert "List(1, 2)" in workers[1] or "List(2, 1)" in workers[1], workers
print("ok")
"""


@pytest.mark.system
def test_a_session_of_another_size_in_the_same_jvm_gets_a_service_of_its_size(tmp_path):
    result = run_job(tmp_path, SERVICE_SIZES_JOB, "")
    assert result.stdout.strip().endswith("ok")
