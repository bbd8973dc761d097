"""The example notebooks run unmodified (on local Spark here) and are stored without outputs."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from conftest import DEMO_NOTEBOOK, execute_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert [n.name for n in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_camera_trap_transfer_learning.ipynb",
        "03_bring_your_own_model.ipynb",
    ]


@pytest.mark.system
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs_and_runs(path, request):
    """The kernel imports mmlspark from this checkout and gets its own local Spark session. The
    camera-trap notebook's run is the suite's demo run (conftest's `demo_notebook`)."""
    stored = nbformat.read(path, as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    if path == DEMO_NOTEBOOK:
        notebook, summary, _, _ = request.getfixturevalue("demo_notebook")
        assert summary["accuracy"] > 0.8  # the notebook's own last cell asserts it too
    else:
        notebook = stored
        execute_notebook(notebook)  # raises CellExecutionError, with the cell, on a failure
    ran = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in ran] == [c.source for c in code]
    assert all(c.execution_count is not None for c in ran)
    assert any(o.get("output_type") == "display_data" for c in ran for o in c.outputs) or (
        path != DEMO_NOTEBOOK
    )


# Every notebook again as on compute that cannot load the jar: the session already there has no
# jar, so every stage picks the Python backend by itself. The camera-trap notebook gets a Spark
# Connect session on a server started without the jar (as serverless and shared compute hand
# one over), the others a plain pyspark session without it.
KEEP_STAGES = """
from mmlspark.core.wrapper import MMLParams
_made, _init = [], MMLParams.__init__
def _kept(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _made.append(self)
MMLParams.__init__ = _kept
"""
PLAIN_SESSION = """
import os, sys
import mmlspark
from pyspark.sql import SparkSession

os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers' Python, as a cluster's image sets it
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
_decision = mmlspark.backend_decision(spark)
assert _decision.backend == "python" and "cannot run the jar" in _decision.reason, _decision
"""
CONNECT_SESSION = """
import mmlspark
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote("{url}").getOrCreate()
_decision = mmlspark.backend_decision(spark)
assert _decision.reason == "the Spark Connect server has no mmlspark jar", _decision
"""


@pytest.mark.system
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_a_session_without_the_jar(path, monkeypatch, request, tmp_path):
    """Every stage made in the notebook (the job's too, which are gone by its end) runs on the
    Python backend. The camera-trap demo over Spark Connect (training, classification,
    evaluation, detection, and the two stages) gives every held-out photo the class and the
    boxes of the run with the jar (the `demo_run` fixture, in this process's session), and the
    model it saved classifies the same on the JVM backend."""
    notebook = nbformat.read(path, as_version=4)
    monkeypatch.delenv("MMLSPARK_BACKEND", raising=False)
    camera_trap = "camera_trap" in path.stem
    if camera_trap:
        url = request.getfixturevalue("jarless_server").url
        session = CONNECT_SESSION.replace("{url}", url)
    else:
        session = PLAIN_SESSION
    notebook.cells.insert(0, nbformat.v4.new_code_cell(session + KEEP_STAGES))
    check = "assert _made and all(o.getBackend() == 'python' for o in _made), _made"
    if camera_trap:
        check += "\nprint('SUMMARY', json.dumps({'work': str(work), **summary}, default=str))"
    notebook.cells.append(nbformat.v4.new_code_cell(check))
    execute_notebook(notebook, TMPDIR=str(tmp_path))
    if camera_trap:
        printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
        summary = json.loads(printed.split("SUMMARY ", 1)[1])
        _same_as_the_jvm_demo(summary, Path(summary["work"]), request)


def _same_as_the_jvm_demo(summary: dict, out: Path, request) -> None:
    import cv2
    from test_camera_trap_python import _predictions, _same_detections, _same_predictions

    from mmlspark.apps.camera_trap import job

    expected_summary, _, jvm_demo = request.getfixturevalue("demo_run")
    assert summary["photos"] == expected_summary["photos"] == 30
    assert summary["failures"] == expected_summary["failures"] == 0
    assert summary["accuracy"] == pytest.approx(expected_summary["accuracy"])
    got = _predictions(out / "predictions")
    _same_predictions(got, _predictions(jvm_demo / "predictions"), 2e-3)
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    expected = json.loads((jvm_demo / "evaluation" / "metrics.json").read_text())
    for key in ("labels", "confusion_matrix", "photos", "failures"):
        assert metrics[key] == expected[key], key
    results = json.loads((out / "predictions" / "results.json").read_text())
    assert {e["file"] for e in results["images"]} == set(got)
    for chart in ("confusion_matrix.png", "samples.png"):  # drawn by opencv-python
        assert cv2.imread(str(out / "evaluation" / chart)) is not None, chart
    # Detection (ObjectDetector, CropDetections on Python) and the two stages: the same boxes,
    # the same metrics, the same classes.
    assert expected_summary["detection_recall"] > 0.8  # boxes were found, and compared below
    for key in ("detection_recall", "detection_precision", "empty_filter", "two_stage_photos"):
        assert summary[key] == pytest.approx(expected_summary[key]), key
    assert summary["two_stage_accuracy"] == pytest.approx(expected_summary["two_stage_accuracy"])
    _same_detections(out / "detections", jvm_demo / "detections")
    _same_detections(out / "two-stage", jvm_demo / "two-stage")
    _same_predictions(_predictions(out / "two-stage"), _predictions(jvm_demo / "two-stage"), 2e-3)
    # The model saved without the jar, on the JVM backend: the same classes for the same photos.
    again = out.parent / "jvm-classify"
    spark = request.getfixturevalue("spark")
    job.classify(
        spark, str(out / "data" / "test"), str(out / "model"), str(again), log=lambda _: None
    )
    _same_predictions(_predictions(again), got, 2e-4)
