"""The example notebooks run unmodified (on local Spark here) and are stored without outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

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
def test_notebook_is_stored_without_outputs_and_runs(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    # The kernel imports mmlspark from this checkout and gets its own local Spark session.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})  # fmt: skip
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on failure
    assert any(o.get("output_type") == "display_data" for c in code for o in c.outputs) or (
        "camera_trap" not in path.stem
    )


# Every notebook again as on compute that cannot load the jar: the session already there is a
# plain pyspark one without it (as serverless and shared compute hand one over), so every stage
# picks the Python backend by itself.
JARLESS_SESSION = """
import os, sys
import mmlspark
from pyspark.sql import SparkSession

os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers' Python, as a cluster's image sets it

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
_decision = mmlspark.backend_decision(spark)
assert _decision.backend == "python" and "cannot run the jar" in _decision.reason, _decision
from mmlspark.core.wrapper import MMLParams
_made, _init = [], MMLParams.__init__
def _kept(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _made.append(self)
MMLParams.__init__ = _kept
"""


@pytest.mark.system
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_a_session_without_the_jar(path, monkeypatch, request):
    """Every stage made in the notebook (the job's too, which are gone by its end) runs on the
    Python backend. The camera-trap demo's held-out photos get the classes and boxes of the run
    with the jar (the `demo_run` fixture, in this process's session)."""
    notebook = nbformat.read(path, as_version=4)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("MMLSPARK_BACKEND", raising=False)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(JARLESS_SESSION))
    check = "assert _made and all(o.getBackend() == 'python' for o in _made), _made"
    if "camera_trap" in path.stem:
        check += "\nprint('SUMMARY', json.dumps({'work': str(work), **summary}, default=str))"
    notebook.cells.append(nbformat.v4.new_code_cell(check))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})  # fmt: skip
    client.execute()
    if "camera_trap" not in path.stem:
        return
    from test_camera_trap_python import _predictions, _same_detections, _same_predictions

    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    summary = json.loads(printed.split("SUMMARY ", 1)[1])
    expected_summary, _, jvm_demo = request.getfixturevalue("demo_run")
    assert summary["photos"] == expected_summary["photos"] == 30
    assert summary["accuracy"] == pytest.approx(expected_summary["accuracy"])
    assert summary["two_stage_accuracy"] == pytest.approx(expected_summary["two_stage_accuracy"])
    out = Path(summary["work"])
    _same_predictions(
        _predictions(out / "predictions"), _predictions(jvm_demo / "predictions"), 2e-3
    )
    _same_detections(out / "detections", jvm_demo / "detections")
