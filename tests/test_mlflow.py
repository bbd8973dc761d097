"""mmlspark.mlflow and the camera-trap CLI's tracking, against a real MLflow tracking server
(sqlite store, proxied artifacts) started on loopback for the module."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# MLflow's usage telemetry off (for the server and the CLI too), before mlflow is imported.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import mlflow  # noqa: E402 - requirements-dev.txt (and mmlspark[mlflow])
import numpy as np  # noqa: E402
import onnx_models  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from image_fixtures import encode, pattern  # noqa: E402
from spark_services import free_port  # noqa: E402

import mmlspark  # noqa: E402

pytestmark = pytest.mark.system  # starts the tracking server (and MLflow its own processes)

DEMO = Path(mmlspark.__file__).parent / "apps" / "camera_trap" / "demo_data"
FEATURIZER = str(DEMO / "featurizer.onnx")
SPECIES = ["deer", "empty", "fox"]


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """An MLflow tracking server starting on a free loopback port (its URL; it is ready once
    `tracking_uri` is)."""
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
         "--artifacts-destination", str(folder / "artifacts"), "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    server.log = folder / "server.log"  # type: ignore[attr-defined]
    server.uri = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        # Killed, not stopped: its graceful stop waits seconds for the clients' idle
        # connections, and its store is this module's temporary folder.
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        log.close()


@pytest.fixture(scope="module")
def tracking_uri(tracking_server):
    """The server's URL once it answers, and the process's tracking URI meanwhile."""
    uri = tracking_server.uri
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert tracking_server.poll() is None, tracking_server.log.read_text()[-3000:]
        assert time.monotonic() < deadline, tracking_server.log.read_text()[-3000:]
        time.sleep(0.2)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(previous)


def _photos() -> list[bytes]:
    """Four small PNGs of one colour each (black, green, blue, white), which the CNN below
    (seed 3) tells apart; the last has a pattern."""
    colours = [(0, 0, 0), (0, 255, 0), (255, 0, 0), (255, 255, 255)]
    photos = [np.full((12, 16, 3), c, dtype=np.uint8) for c in colours]
    photos[-1][::2] = pattern(6, 16, seed=1)
    return [encode(p, ".png") for p in photos]


def _pipeline():
    """Photos' bytes -> decoded -> 8x8 tensors -> a small CNN (ONNX Runtime) -> species
    (pyspark's IndexToString of the arg max)."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import IndexToString

    from mmlspark.image import ImageDecoder
    from mmlspark.onnx import ONNXModel
    from mmlspark.opencv import ImageTransformer

    tensors = ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True).resize(
        height=8, width=8
    )
    scores = ONNXModel(
        feedDict={"image": "tensor"},
        fetchDict={"logits": "logits"},
        softMaxDict={"logits": "probability"},
        argMaxDict={"logits": "index"},
    ).setModelPayload(onnx_models.small_cnn(classes=3, size=8, seed=3))
    names = IndexToString(inputCol="index", outputCol="species", labels=SPECIES)
    return PipelineModel([ImageDecoder(inputCol="content"), tensors, scores, names])


def _as_lists(values) -> list[list[float]]:
    return [list(np.asarray(v, dtype=np.float64)) for v in values]


@dataclass
class Logged:
    uri: str  # the model's
    run_id: str
    frame: pd.DataFrame  # the photos, as the model takes them
    species: list[str]  # what the pipeline's own transform gave
    probability: list[list[float]]


@pytest.fixture(scope="module")
def logged(spark, tracking_server, request) -> Logged:
    """The pipeline logged to the server, and its predictions computed directly (while the
    server starts)."""
    import mmlspark.mlflow

    frame = pd.DataFrame({"content": _photos()})
    model = _pipeline()
    direct = model.transform(spark.createDataFrame(frame)).select("species", "probability")
    rows = direct.collect()
    species, probability = [r.species for r in rows], _as_lists(r.probability for r in rows)
    # the reference itself: softmax rows, species the arg max of each
    assert np.allclose([sum(p) for p in probability], 1.0, atol=1e-5)
    assert species == [SPECIES[int(np.argmax(p))] for p in probability]
    assert len(set(species)) > 1  # the photos are told apart
    request.getfixturevalue("tracking_uri")
    with mlflow.start_run() as run:
        info = mmlspark.mlflow.log_model(
            model, "model", input_example=frame.iloc[:2], prediction_cols=["species", "probability"]
        )
    return Logged(info.model_uri, run.info.run_id, frame, species, probability)


def _check(predicted: pd.DataFrame, logged: Logged, rtol: float) -> None:
    assert list(predicted.columns) == ["species", "probability"]
    assert list(predicted["species"]) == logged.species
    assert np.allclose(_as_lists(predicted["probability"]), logged.probability, rtol=rtol)


def test_logged_model_has_a_signature_and_an_input_example(logged, tmp_path):
    from mlflow.tracking import MlflowClient

    info = mlflow.models.get_model_info(logged.uri)
    inputs = info.signature.inputs.to_dict()
    outputs = info.signature.outputs.to_dict()
    assert [(c["name"], c["type"]) for c in inputs] == [("content", "binary")]
    assert [c["name"] for c in outputs] == ["species", "probability"]
    assert outputs[0]["type"] == "string" and outputs[1]["type"] == "array"
    folder = mlflow.artifacts.download_artifacts(logged.uri, dst_path=str(tmp_path))
    example = mlflow.models.Model.load(folder).load_input_example(folder)
    assert list(example["content"]) == list(logged.frame["content"][:2])
    requirements = (Path(folder) / "requirements.txt").read_text().split()
    assert f"mmlspark=={mmlspark.__version__}" in requirements
    run = MlflowClient().get_run(logged.run_id)
    assert run.info.status == "FINISHED"
    assert info.model_uuid in {m.model_id for m in run.outputs.model_outputs}


def test_pyfunc_predicts_as_the_pipeline(logged):
    _check(mlflow.pyfunc.load_model(logged.uri).predict(logged.frame), logged, rtol=1e-6)


def test_spark_udf_predicts_as_the_pipeline(spark, logged):
    """In Spark tasks (whose Python worker starts a local session of its own), the columns
    from the signature."""
    udf = mlflow.pyfunc.spark_udf(spark, logged.uri)
    rows = spark.createDataFrame(logged.frame).coalesce(1)  # one task: one worker's session
    scored = rows.withColumn("out", udf("content")).select("out.*").toPandas()
    _check(scored, logged, rtol=1e-6)


def test_pyfunc_on_a_connect_server_without_the_jar(logged, jarless_connect):
    """The model loaded where the active session is a Spark Connect one without the jar: the
    stages run on the Python backend (of the server's Python workers), with the JVM's results to
    rtol 1e-5; load_model gives the pipeline on that backend."""
    from conftest import connect_mode

    import mmlspark.mlflow

    with connect_mode():
        loaded = mlflow.pyfunc.load_model(logged.uri)
        assert loaded.unwrap_python_model()._spark is jarless_connect
        _check(loaded.predict(logged.frame), logged, rtol=1e-5)
        pipeline = mmlspark.mlflow.load_model(logged.uri)
        assert mmlspark.backend_decision(jarless_connect).backend == "python"
    assert [type(s).__name__ for s in pipeline.stages] == [
        "ImageDecoder", "ImageTransformer", "ONNXModel", "IndexToString",
    ]  # fmt: skip


def test_without_mlflow_the_import_and_the_cli_say_what_to_install(monkeypatch, tmp_path, capsys):
    from mmlspark.apps.camera_trap import __main__ as cli

    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` raises ImportError
    monkeypatch.delitem(sys.modules, "mmlspark.mlflow", raising=False)
    monkeypatch.delattr(mmlspark, "mlflow", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'mmlspark\[mlflow\]'"):
        importlib.import_module("mmlspark.mlflow")
    # The CLI asked to track: exit code 2 before any work (no Spark session), saying so.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    out = tmp_path / "evaluation"
    assert cli.main(["evaluate", "--predictions", str(tmp_path), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "MLflow cannot be imported" in error and "pip install 'mmlspark[mlflow]'" in error
    assert not out.exists()


def _copy(target: Path, every: int) -> None:
    for label in ("deer", "empty", "fox"):
        for photo in sorted((DEMO / "images" / label).glob("*.jpg"))[::every]:
            (target / label).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(photo, target / label / photo.name)


def test_cli_train_and_evaluate_log_runs(spark, tracking_uri, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from mmlspark.apps.camera_trap import __main__ as cli

    # An unreachable server fails before any work, with exit code 2.
    dead = f"http://127.0.0.1:{free_port()}"
    args = ["train", "--images", str(tmp_path / "none"), "--featurizer", FEATURIZER,
            "--model-out", str(tmp_path / "never")]  # fmt: skip
    assert cli.main([*args, "--mlflow-uri", dead]) == 2
    assert f"cannot reach the MLflow tracking server at {dead}" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()

    images = tmp_path / "survey"
    _copy(images, every=10)
    model = tmp_path / "model"
    experiment = "camera-trap-test"
    tracked = ["--mlflow-uri", tracking_uri, "--mlflow-experiment", experiment]
    assert cli.main(["train", "--images", str(images), "--featurizer", FEATURIZER,
                     "--model-out", str(model), *tracked]) == 0  # fmt: skip
    out = tmp_path / "run"
    assert cli.main(["classify", "--images", str(images), "--model", str(model),
                     "--out", str(out)]) == 0  # fmt: skip
    evaluation = tmp_path / "evaluation"
    assert cli.main(["evaluate", "--predictions", str(out), "--out", str(evaluation),
                     *tracked]) == 0  # fmt: skip

    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    runs = {r.info.run_name: r for r in client.search_runs([found.experiment_id])}
    assert set(runs) == {"train", "evaluate"}
    train, evaluate = runs["train"], runs["evaluate"]
    assert train.info.status == evaluate.info.status == "FINISHED"
    assert train.data.params["images"] == str(images)
    assert train.data.params["image_size"] == "96" and train.data.params["feature_node"] == "pool"
    photos = sum(1 for _ in images.rglob("*.jpg"))
    assert train.data.metrics["photos"] == photos and train.data.metrics["failures"] == 0

    # train's model: a pyfunc model of photos' bytes, predicting as classify did
    logged = mlflow.models.get_model_info(f"runs:/{train.info.run_id}/model")
    assert [c["name"] for c in logged.signature.inputs.to_dict()] == ["content"]
    paths = sorted(images.rglob("*.jpg"))[:3]
    frame = pd.DataFrame({"content": [p.read_bytes() for p in paths]})
    predicted = mlflow.pyfunc.load_model(logged.model_uri).predict(frame)
    classified = {
        r["path"]: r["predicted_label"]
        for r in pd.read_csv(out / "predictions.csv").to_dict("records")
    }
    assert list(predicted["prediction"]) == [classified[str(p.relative_to(images))] for p in paths]

    # evaluate's metrics: those of its metrics.json, and its files as artifacts
    written = json.loads((evaluation / "metrics.json").read_text())
    assert evaluate.data.params["predictions"] == str(out)
    assert evaluate.data.metrics["accuracy"] == pytest.approx(written["accuracy"])
    assert evaluate.data.metrics["photos"] == written["photos"] == photos
    for name in written["labels"]:
        assert evaluate.data.metrics[f"precision_per_class.{name}"] == pytest.approx(
            written["precision_per_class"][name]
        )
        assert evaluate.data.metrics[f"recall_per_class.{name}"] == pytest.approx(
            written["recall_per_class"][name]
        )
    artifacts = {a.path for a in client.list_artifacts(evaluate.info.run_id)}
    assert {"metrics.json", "confusion_matrix.png", "samples.png"} <= artifacts
    chart = client.download_artifacts(evaluate.info.run_id, "confusion_matrix.png", str(tmp_path))
    assert Path(chart).read_bytes() == (evaluation / "confusion_matrix.png").read_bytes()


def test_metrics_are_the_numbers_of_evaluates_output_flattened():
    from mmlspark.apps.camera_trap.tracking import numbers

    written = {
        "photos": 12,
        "bursts": "off",
        "accuracy": 0.75,
        "labels": ["deer", "red fox"],
        "precision_per_class": {"deer": 1.0, "red fox": 0.5},
        "empty_filter": {"nonempty_precision": None, "tp": 3, "flag": True},
        "confusion_matrix": [[1, 0], [1, 1]],
    }
    assert numbers(written) == {
        "photos": 12.0,
        "accuracy": 0.75,
        "precision_per_class.deer": 1.0,
        "precision_per_class.red fox": 0.5,
        "empty_filter.tp": 3.0,
    }


def test_a_failure_to_log_after_the_work_says_the_outputs_are_written(tmp_path):
    import argparse

    from mmlspark.apps.camera_trap import tracking
    from mmlspark.apps.camera_trap.settings import JobError

    class Unreachable:
        def log_metrics(self, metrics):
            raise ConnectionError("the server went away")

        def get_tracking_uri(self):
            return "http://127.0.0.1:1"

    args = argparse.Namespace(command="evaluate", out=str(tmp_path))
    with pytest.raises(JobError, match="outputs are written.*the server went away"):
        tracking.Tracker(Unreachable(), "", args).log(None, {"accuracy": 1.0})
