"""One format on disk for both backends: a stage or pipeline saved by one loads and runs on the
other with the same results (the JVM stages' Spark ML layout, with ``model.onnx`` beside the
metadata)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_models
import pytest
from image_fixtures import encode, pattern
from pyspark.ml import PipelineModel
from pyspark.ml.feature import SQLTransformer

import mmlspark
from mmlspark.image import ImageDecoder, UnrollBinaryImage
from mmlspark.onnx import ImageFeaturizer, ONNXModel
from mmlspark.opencv import ImageSetAugmenter, ImageTransformer
from mmlspark.stages import (
    BufferedMiniBatchTransformer,
    DynamicMiniBatchTransformer,
    MiniBatchTransformer,
    SelectColumns,
    Timer,
)


@pytest.fixture(scope="module")
def photos(spark):
    rows = [(f"p{i}", encode(pattern(40 + i, 50 - i, seed=i), ".jpg")) for i in range(5)]
    rows.append(("bad", b"not a photo"))
    return spark.createDataFrame(rows, "path string, content binary")


def _rows(df, key="path"):
    return {r[key]: r.asDict() for r in df.collect()}


def _same(a, b):
    assert a.keys() == b.keys()
    for key, row in a.items():
        for name, value in row.items():
            other = b[key][name]
            if hasattr(value, "toArray"):
                np.testing.assert_allclose(other.toArray(), value.toArray(), rtol=1e-5)
            elif isinstance(value, list) and value and isinstance(value[0], float):
                np.testing.assert_allclose(other, value, rtol=1e-5)
            else:
                assert other == value, (key, name)


def _stages():
    model = onnx_models.small_cnn(classes=3, size=12)
    return [
        lambda: ImageDecoder(originCol="path", minHeight=20, minWidth=20),
        lambda: (
            ImageTransformer(inputCol="content", outputCol="tensor", toTensor=True)
            .resize(12, 12)
            .normalize(mean=[0.5], std=[0.25], colorScaleFactor=1 / 255)
        ),
        lambda: (
            ImageFeaturizer(
                inputCol="content",
                imageHeight=12,
                imageWidth=12,
                dropNa=False,
                ignoreDecodingErrors=True,
            )
            .setModelPayload(model)
            .setFeatureTensorName("features")
        ),
    ]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["decoder", "transformer", "featurizer"])
def test_saved_on_the_jvm_loads_on_python_and_back(spark, photos, tmp_path, index):
    make = _stages()[index]
    jvm_stage = make()
    assert jvm_stage.getBackend() == "jvm"
    expected = _rows(jvm_stage.transform(photos))
    jvm_stage.write().save(str(tmp_path / "jvm"))
    mmlspark.set_backend("python")
    try:
        loaded = type(jvm_stage).load(str(tmp_path / "jvm"))
        assert loaded.getBackend() == "python" and loaded.uid == jvm_stage.uid
        _same(expected, _rows(loaded.transform(photos)))
        loaded.write().save(str(tmp_path / "python"))
        with pytest.raises(FileExistsError, match="already exists"):
            loaded.write().save(str(tmp_path / "python"))
        loaded.write().overwrite().save(str(tmp_path / "python"))
    finally:
        mmlspark.set_backend(None)
    back = type(jvm_stage).load(str(tmp_path / "python"))
    assert back.getBackend() == "jvm" and back.uid == jvm_stage.uid
    assert back.extractParamMap() == jvm_stage.extractParamMap()
    _same(expected, _rows(back.transform(photos)))


def _plain_params(stage):
    """The params of `stage` by name, a stage-valued one as its stage's class, uid and params."""
    values = {}
    for param, value in stage.extractParamMap().items():
        if hasattr(value, "extractParamMap"):
            value = (type(value).__name__, value.uid, _plain_params(value))
        values[param.name] = value
    return values


def _misc_stages(photos):
    """The utility and image stages of the second round of Python backends, with the input each
    runs on (`photos`, or its images decoded), and whether it is fitted first."""
    return [
        (lambda: UnrollBinaryImage(height=6, width=5, outputCol="v", colorMode="grayscale"), False),
        (lambda: ImageSetAugmenter(flipUpDown=True, outputCol="flipped"), True),
        (lambda: MiniBatchTransformer(miniBatchSize=2), False),
        (lambda: BufferedMiniBatchTransformer(miniBatchSize=4, maxBufferMillis=60_000), False),
        (lambda: DynamicMiniBatchTransformer(maxBatchSize=1), False),
        (lambda: Timer(stage=SelectColumns(cols=["path"]), materialize=False), False),
        (lambda: Timer(stage=SelectColumns(cols=["path", "content"])).fit(photos), False),
    ]


@pytest.mark.parametrize(
    "index",
    range(7),
    ids=["unroll-binary", "augmenter", "mini-batch", "buffered", "dynamic", "timer", "timer-model"],
)
def test_more_stages_cross_backends(spark, photos, tmp_path, index):
    """Each stage saved on the JVM loads on Python (uid, params and results kept), saves there in
    the same layout (a wrapped stage under params/stage) and loads back on the JVM."""
    from pyspark.ml.base import Estimator

    make, on_images = _misc_stages(photos)[index]
    df = photos
    if on_images:
        df = ImageDecoder(originCol="path").transform(photos).select("path", "image")

    def run(stage):
        out = stage.fit(df).transform(df) if isinstance(stage, Estimator) else stage.transform(df)
        return [repr(r) for r in out.collect()]

    jvm_stage = make()
    assert jvm_stage.getBackend() == "jvm"
    expected = run(jvm_stage)
    jvm_stage.write().save(str(tmp_path / "jvm"))
    wraps = jvm_stage.hasParam("stage")
    assert (tmp_path / "jvm" / "params" / "stage" / "metadata").is_dir() == wraps
    mmlspark.set_backend("python")
    try:
        loaded = type(jvm_stage).load(str(tmp_path / "jvm"))
        assert loaded.getBackend() == "python" and loaded.uid == jvm_stage.uid
        assert _plain_params(loaded) == _plain_params(jvm_stage)
        if wraps:
            assert loaded.getStage().getBackend() == "python"
        assert run(loaded) == expected
        loaded.write().save(str(tmp_path / "python"))
    finally:
        mmlspark.set_backend(None)
    saved = json.loads((tmp_path / "python" / "metadata" / "part-00000").read_text())
    assert "stage" not in saved["paramMap"]
    assert (tmp_path / "python" / "params" / "stage" / "metadata").is_dir() == wraps
    back = type(jvm_stage).load(str(tmp_path / "python"))
    assert back.getBackend() == "jvm" and back.uid == jvm_stage.uid
    assert _plain_params(back) == _plain_params(jvm_stage)
    assert run(back) == expected


def test_a_stage_holding_an_unsaveable_stage_says_so(tmp_path, python_backend):
    from pyspark.ml.base import Transformer

    class Kept(Transformer):
        def _transform(self, dataset):
            return dataset

    timer = Timer().setStage(Kept())
    with pytest.raises(ValueError, match=r"param 'stage' holds Kept, which cannot be saved \(it"):
        timer.write().save(str(tmp_path / "timer"))
    assert not (tmp_path / "timer").exists()


def test_a_python_stage_saved_with_a_model_file_location_keeps_the_model(
    spark, tmp_path, python_backend
):
    model = onnx_models.small_cnn(classes=2, size=4)
    (tmp_path / "net.onnx").write_bytes(model)
    stage = ONNXModel(modelLocation=str(tmp_path / "net.onnx"), inputCol="t", outputCol="y")
    stage.write().save(str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "model.onnx").read_bytes() == model
    meta = json.loads((tmp_path / "saved" / "metadata" / "part-00000").read_text())
    assert meta["class"] == "mmlspark.onnx.ONNXModel" and meta["paramMap"]["inputCol"] == "t"
    (tmp_path / "net.onnx").unlink()  # the saved stage runs the model saved with it
    loaded = ONNXModel.load(str(tmp_path / "saved"))
    df = spark.createDataFrame([([0.5] * 48,)], "t array<float>")
    assert loaded.transform(df).collect()[0]["onnxError"] is None
    with pytest.raises(NotImplementedError, match="driver's own filesystem"):
        loaded.write().save("s3a://bucket/model")


def test_pipelines_cross_backends_with_spark_stages_among_ours(spark, photos, tmp_path):
    model = onnx_models.small_cnn(classes=3, size=12)

    def pipeline():
        return PipelineModel(
            [
                ImageTransformer(inputCol="content", outputCol="tensor", toTensor=True).resize(
                    12, 12
                ),
                ONNXModel(inputCol="tensor", outputCol="logits").setModelPayload(model),
                SQLTransformer(statement="SELECT path, logits, onnxError FROM __THIS__"),
            ]
        )

    jvm_model = pipeline()
    expected = _rows(jvm_model.transform(photos))
    jvm_model.write().save(str(tmp_path / "jvm"))
    mmlspark.set_backend("python")
    try:
        loaded = mmlspark.load_pipeline(str(tmp_path / "jvm"))
        assert [type(s).__name__ for s in loaded.stages] == [
            "ImageTransformer",
            "ONNXModel",
            "SQLTransformer",
        ]
        assert [s.getBackend() for s in loaded.stages[:2]] == ["python", "python"]
        _same(expected, _rows(loaded.transform(photos)))
        mmlspark.save_pipeline(loaded, str(tmp_path / "python"))
        python_model = pipeline()
        _same(expected, _rows(python_model.transform(photos)))
        mmlspark.save_pipeline(python_model, str(tmp_path / "python2"))
    finally:
        mmlspark.set_backend(None)
    for saved in ("python", "python2"):
        back = PipelineModel.load(str(tmp_path / saved))  # Spark's own reader, on the JVM
        assert [s.getBackend() for s in back.stages[:2]] == ["jvm", "jvm"]
        _same(expected, _rows(back.transform(photos)))
        assert [type(s).__name__ for s in mmlspark.load_pipeline(str(tmp_path / saved)).stages][
            :2
        ] == ["ImageTransformer", "ONNXModel"]


def _saved_as(folder, class_name):
    """Rewrites the class name in the metadata of the stage saved in `folder`, as an earlier
    mmlspark wrote it (Hadoop's checksum file of the metadata goes with the old bytes)."""
    part = next(p for p in (folder / "metadata").glob("part-*") if p.stat().st_size)
    metadata = json.loads(part.read_text().splitlines()[0])
    metadata["class"] = class_name
    part.write_text(json.dumps(metadata) + "\n")
    (folder / "metadata" / f".{part.name}.crc").unlink(missing_ok=True)


def _loads_under_its_former_class_name(stage, former, df, result, same, tmp_path):
    """Saves `stage` and a pipeline of it, renames their class to `former` (the name an earlier
    mmlspark saved the stage under) and loads both on the JVM and on the Python backend: each
    loads as the stage's class, with its uid and the `same` `result` of `df`; another stage's
    save is still refused, and the stage saves again under its new name."""
    cls = type(stage)
    expected = result(stage.transform(df))
    stage.write().save(str(tmp_path / "stage"))
    PipelineModel([stage]).write().save(str(tmp_path / "pipeline"))
    _saved_as(tmp_path / "stage", former)
    (in_pipeline,) = (tmp_path / "pipeline" / "stages").iterdir()
    _saved_as(in_pipeline, former)
    ImageDecoder().write().save(str(tmp_path / "decoder"))

    def check(loaded):
        assert type(loaded) is cls and loaded.uid == stage.uid
        same(expected, result(loaded.transform(df)))

    # The JVM: the new class's load, Spark's PipelineModel.load (which finds the reader by the
    # saved class name) and mmlspark's load_pipeline.
    check(cls.load(str(tmp_path / "stage")))
    check(PipelineModel.load(str(tmp_path / "pipeline")).stages[0])
    check(mmlspark.load_pipeline(str(tmp_path / "pipeline")).stages[0])
    with pytest.raises(Exception, match="mmlspark.image.ImageDecoder"):
        cls.load(str(tmp_path / "decoder"))
    mmlspark.set_backend("python")
    try:
        check(cls.load(str(tmp_path / "stage")))
        check(mmlspark.load_pipeline(str(tmp_path / "pipeline")).stages[0])
        with pytest.raises(ValueError, match="is a mmlspark.image.ImageDecoder, not a mmlspark"):
            cls.load(str(tmp_path / "decoder"))
        # and it saves under its new name
        cls.load(str(tmp_path / "stage")).write().save(str(tmp_path / "again"))
    finally:
        mmlspark.set_backend(None)
    again = next((tmp_path / "again" / "metadata").glob("part-*")).read_text()
    assert json.loads(again)["class"] == cls._java_class_name


def test_a_featurizer_saved_under_its_former_class_name_loads_on_both_backends(
    spark, photos, tmp_path
):
    """ImageFeaturizer moved from mmlspark.image to mmlspark.onnx: a stage or pipeline saved under
    the old class name loads, as the new class, with the same uid and the same vectors."""
    import mmlspark.image

    assert mmlspark.image.ImageFeaturizer is ImageFeaturizer
    assert ImageFeaturizer._java_class_name == "mmlspark.onnx.ImageFeaturizer"
    _loads_under_its_former_class_name(
        _stages()[2](), "mmlspark.image.ImageFeaturizer", photos, _rows, _same, tmp_path
    )


def test_an_augmenter_saved_under_its_former_class_name_loads_on_both_backends(
    spark, photos, tmp_path
):
    """ImageSetAugmenter moved from mmlspark.image to mmlspark.opencv: a stage or pipeline saved
    under the old class name loads, as the new class, with the same uid and the same images, each
    row's image then its flips as cv2.flip gives them."""
    import cv2

    import mmlspark.image

    assert mmlspark.image.ImageSetAugmenter is ImageSetAugmenter
    assert ImageSetAugmenter._java_class_name == "mmlspark.opencv.ImageSetAugmenter"
    two = photos.filter(photos.path.isin("p0", "p1"))
    images = ImageDecoder(originCol="path").transform(two).select("path", "image")

    def pixels(image):
        shape = (image["height"], image["width"], image["nChannels"])
        return np.frombuffer(image["data"], np.uint8).reshape(shape)

    def augmented(out):
        by_path = {}
        for r in out.collect():
            by_path.setdefault(r["path"], []).append(pixels(r["flipped"]).tobytes())
        return by_path

    originals = {r["path"]: pixels(r["image"]) for r in images.collect()}
    stage = ImageSetAugmenter(flipUpDown=True, outputCol="flipped")
    assert augmented(stage.transform(images)) == {
        path: [p.tobytes(), cv2.flip(p, 1).tobytes(), cv2.flip(p, 0).tobytes()]
        for path, p in originals.items()
    }

    def same(expected, got):
        assert got == expected

    _loads_under_its_former_class_name(
        stage, "mmlspark.image.ImageSetAugmenter", images, augmented, same, tmp_path
    )


def test_python_saves_to_local_and_databricks_mounted_paths_only():
    from pathlib import Path

    from mmlspark.core.persistence import _local

    assert _local("dbfs:/Volumes/main/s/m/model", "saving") == Path("/Volumes/main/s/m/model")
    assert _local("dbfs:/mnt/models/m", "saving") == Path("/dbfs/mnt/models/m")
    assert _local("file:///tmp/m", "saving") == Path("/tmp/m")
    assert _local("relative/m", "saving") == Path("relative/m")
    with pytest.raises(NotImplementedError, match="saving: the Python backend saves .* not 's3a"):
        _local("s3a://bucket/m", "saving")


def test_models_with_external_data_run_and_load_on_python(spark, tmp_path):
    """A model that keeps its weights in a file beside it (ONNX external data): read in on the
    driver, from its modelLocation or from a JVM save that copied the file beside model.onnx,
    with the JVM's results; a file outside the model's folder or missing is refused, named."""
    from pyspark.ml import Pipeline

    source = onnx_models.save_with_external_data(onnx_models.small_cnn(), tmp_path / "src")
    images = np.random.default_rng(4).normal(size=(5, 3, 8, 8)).astype(np.float32)
    df = spark.createDataFrame(
        [(i, images[i].tolist()) for i in range(5)], "id int, image array<array<array<float>>>"
    )
    kwargs = dict(modelLocation=str(source), inputCol="image", outputCol="logits")
    expected = _rows(ONNXModel(**kwargs).transform(df), "id")
    on_python = ONNXModel(**kwargs).setBackend("python")

    def check(got: dict) -> None:
        assert got.keys() == expected.keys()
        for i, row in expected.items():
            assert got[i]["onnxError"] is row["onnxError"] is None
            np.testing.assert_allclose(got[i]["logits"], row["logits"], rtol=1e-5, atol=1e-6)

    check(_rows(on_python.transform(df), "id"))
    Pipeline(stages=[ONNXModel(**kwargs)]).fit(df).write().save(str(tmp_path / "saved"))
    (stage,) = (tmp_path / "saved" / "stages").glob("0_*")
    assert (stage / "weights.bin").is_file()  # the JVM saved the weights beside model.onnx
    for f in (tmp_path / "src").iterdir():
        f.unlink()
    mmlspark.set_backend("python")
    try:
        loaded = mmlspark.load_pipeline(str(tmp_path / "saved"))
        assert loaded.stages[0].getBackend() == "python"
        check(_rows(loaded.transform(df), "id"))
        (stage / "weights.bin").unlink()
        with pytest.raises(ValueError, match=r"keeps tensor data in 'weights\.bin', which is miss"):
            mmlspark.load_pipeline(str(tmp_path / "saved"))
    finally:
        mmlspark.set_backend(None)

    proto = onnx.load_from_string(onnx_models.small_cnn())
    tensor = proto.graph.initializer[0]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    outside = ONNXModel(modelLocation=str(tmp_path / "m.onnx")).setBackend("python")
    with pytest.raises(ValueError, match=r"'\.\./secret\.bin', which is not a file in the model"):
        outside.getModelInputs()


JARLESS_PIPELINE = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from pyspark.ml import Pipeline, PipelineModel
from pyspark.sql import SparkSession
import mmlspark
from mmlspark.image import read_images
from mmlspark.onnx import ImageFeaturizer, ONNXModel
from mmlspark.opencv import ImageTransformer

os.environ["PYSPARK_PYTHON"] = sys.executable
folder = Path(sys.argv[1])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())  # no jar
assert mmlspark.backend_decision(spark).backend == "python"
photos = read_images(spark, str(folder / "photos"))
pipeline = Pipeline(stages=[
    ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
    .normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25], colorScaleFactor=1 / 255),
    ONNXModel(feedDict={"image": "tensor"}, fetchDict={"logits": "logits"})
    .setModelPayload((folder / "model.onnx").read_bytes()),
])
pipeline.save(str(folder / "pipeline"))  # pyspark's own save and load, as users call them
fitted = Pipeline.load(str(folder / "pipeline")).fit(photos)
fitted.write().overwrite().save(str(folder / "fitted"))
loaded = PipelineModel.load(str(folder / "fitted"))
assert [s.getBackend() for s in loaded.stages] == ["python", "python"]
rows = loaded.transform(photos).select("path", "logits", "onnxError").collect()
print("RESULT " + json.dumps([r.asDict() for r in rows]))
"""


@pytest.mark.system
def test_pipelines_save_and_load_with_pyspark_s_own_calls_on_a_session_without_the_jar(
    spark, tmp_path
):
    """A classic session without the jar (every stage on the Python backend): ``Pipeline.save``,
    ``Pipeline.load``, ``PipelineModel.write().save`` and ``PipelineModel.load``, as pyspark
    users call them, give the scores of opencv-python and onnxruntime; the saved model loads on
    the JVM backend (this process's session has the jar) with the same scores."""
    import cv2
    import onnxruntime
    from conftest import run_job

    from mmlspark.image import read_images

    model = onnx_models.small_cnn(classes=3, size=12)
    (tmp_path / "model.onnx").write_bytes(model)
    (tmp_path / "photos").mkdir()
    reference = {}
    runner = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for i in range(4):
        png = encode(pattern(12, 12, seed=i), ".png")
        (tmp_path / "photos" / f"p{i}.png").write_bytes(png)
        rgb = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
        tensor = ((rgb.astype(np.float32) / 255 - 0.5) / 0.25).transpose(2, 0, 1)[None]
        reference[f"p{i}.png"] = runner.run(["logits"], {"image": tensor})[0][0]
    result = run_job(tmp_path, JARLESS_PIPELINE, str(tmp_path))
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    rows = {r["path"].rsplit("/", 1)[1]: r for r in json.loads(line.removeprefix("RESULT "))}
    assert rows.keys() == reference.keys()
    for name, expected in reference.items():
        assert rows[name]["onnxError"] is None
        np.testing.assert_allclose(rows[name]["logits"], expected, rtol=1e-5, atol=1e-6)
    on_jvm = PipelineModel.load(str(tmp_path / "fitted"))
    assert [s.getBackend() for s in on_jvm.stages] == ["jvm", "jvm"]
    scored = on_jvm.transform(read_images(spark, str(tmp_path / "photos"))).collect()
    for r in scored:
        np.testing.assert_allclose(r["logits"], reference[r["path"].rsplit("/", 1)[1]], rtol=1e-5)
