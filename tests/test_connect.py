"""Spark Connect: a real Connect server (scripts/spark_services.py) with mmlspark loaded, and a
Connect client in a process of its own (a Python process holds one kind of session). The client
builds ImageTransformer + ONNXModel + LogisticRegression into a Pipeline, fits, transforms, saves
and loads it; the results must equal the same pipeline on a classic session."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import run_job

from mmlspark.apps.camera_trap import job
from mmlspark.core.compat import connect_ml_supported
from mmlspark.image import read_images

# The Connect round trip of every line whose Connect server runs ML (4.x).
pytestmark = [pytest.mark.lines] if connect_ml_supported() else []

ROOT = Path(__file__).resolve().parent.parent

FEATURIZER = str(job.DEMO_DATA / "featurizer.onnx")
IMAGES = str(job.DEMO_DATA / "images")

# Shared by the classic run here and the Connect client (its source is sent to the client).
PIPELINE = textwrap.dedent(
    """
    def build_pipeline(featurizer):
        from pyspark.ml import Pipeline
        from pyspark.ml.classification import LogisticRegression
        from mmlspark.onnx import ONNXModel
        from mmlspark.opencv import ImageTransformer

        return Pipeline(stages=[
            ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
            .resize(height=32, width=32)
            .normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25], colorScaleFactor=1 / 255),
            ONNXModel(modelLocation=featurizer, feedDict={"image": "tensor"},
                      fetchDict={"features": "logits"}, vectorOutputs=True),
            LogisticRegression(maxIter=50, regParam=0.01),
        ])


    def labelled(df):
        from pyspark.sql import functions as F

        species = F.regexp_extract("path", "/images/([a-z]+)/", 1)
        label = F.when(species == "deer", 0.0).when(species == "fox", 1.0).otherwise(2.0)
        return df.withColumn("label", label)


    def results(df):
        from pyspark.ml.functions import vector_to_array
        from pyspark.sql import functions as F

        rows = (df.select(F.regexp_extract("path", "/images/(.*)$", 1).alias("file"),
                          vector_to_array("features").alias("features"),
                          vector_to_array("probability").alias("probability"), "prediction")
                .orderBy("file").collect())
        return [r.asDict() for r in rows]
    """
)

CLIENT = PIPELINE + textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from pyspark.ml import PipelineModel
    from pyspark.ml.classification import LogisticRegression
    from mmlspark.core.wrapper import ConnectNotSupportedError
    from mmlspark.image import read_images
    from mmlspark.onnx import ONNXModel
    from mmlspark.train import TrainClassifier

    url, featurizer, images, saved = sys.argv[1].split("|")
    spark = SparkSession.builder.remote(url).getOrCreate()
    assert type(spark).__module__ == "pyspark.sql.connect.session"
    photos = labelled(read_images(spark, images))
    model = build_pipeline(featurizer).fit(photos)
    fitted = results(model.transform(photos))
    model.write().overwrite().save(saved)
    loaded = results(PipelineModel.load(saved).transform(photos))
    errors = []
    for attempt in (
        lambda: ONNXModel().getModelInputs(),
        lambda: ONNXModel().setModelPayload(b"onnx"),
        lambda: TrainClassifier(model=LogisticRegression()),
    ):
        try:
            attempt()
            errors.append(None)
        except ConnectNotSupportedError as e:
            errors.append(str(e))
    print("RESULT " + json.dumps({"fitted": fitted, "loaded": loaded, "errors": errors}))
    spark.stop()
    """
)


def classic_results(spark) -> list[dict]:
    scope: dict = {}
    exec(PIPELINE, scope)  # noqa: S102 - the shared pipeline definition above
    photos = scope["labelled"](read_images(spark, IMAGES))
    model = scope["build_pipeline"](FEATURIZER).fit(photos)
    return scope["results"](model.transform(photos))


def test_pipeline_over_connect_equals_classic(connect_server, spark, tmp_path):
    saved = tmp_path / "saved-over-connect"
    argument = "|".join([connect_server.url, FEATURIZER, IMAGES, str(saved)])
    result = run_job(tmp_path, CLIENT, argument)
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    remote = json.loads(line[len("RESULT ") :])
    expected = classic_results(spark)
    assert len(expected) == 120
    for name in ("fitted", "loaded"):
        rows = remote[name]
        assert [r["file"] for r in rows] == [r["file"] for r in expected]
        for r, e in zip(rows, expected, strict=True):
            assert r["features"] == pytest.approx(e["features"], rel=1e-6), r["file"]
            assert r["probability"] == pytest.approx(e["probability"], rel=1e-4, abs=1e-6)
            assert r["prediction"] == e["prediction"], r["file"]
    # The saved pipeline is a plain PipelineModel that a classic session loads too.
    from pyspark.ml import PipelineModel

    reloaded = PipelineModel.load(str(saved))
    assert [type(s).__name__ for s in reloaded.stages] == [
        "ImageTransformer",
        "ONNXModel",
        "LogisticRegressionModel",
    ]
    # What needs the driver's JVM says so, naming what to do instead.
    inputs, payload, stage_param = remote["errors"]
    assert "getModelInputs" in inputs and "inspect_model" in inputs
    assert "setModelPayload" in payload and "modelLocation" in payload
    assert "TrainClassifier.model" in stage_param and "Spark Connect" in stage_param
