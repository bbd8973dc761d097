"""The example notebooks run unmodified (on local Spark here) and are stored without outputs."""

from __future__ import annotations

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


# Every notebook again with every stage on the Python backend, as on compute that cannot load
# the jar (the camera-trap demo skips its detection part there).
@pytest.mark.system
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_the_python_backend(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MMLSPARK_BACKEND", "python")
    # Every stage made in the notebook (the job's too, which are gone by its end) is kept.
    notebook.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            "from mmlspark.core.wrapper import MMLParams\n"
            "_made, _init = [], MMLParams.__init__\n"
            "def _kept(self, *args, **kwargs):\n"
            "    _init(self, *args, **kwargs)\n"
            "    _made.append(self)\n"
            "MMLParams.__init__ = _kept"
        ),
    )
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "assert _made and all(o.getBackend() == 'python' for o in _made), _made"
        )
    )
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})  # fmt: skip
    client.execute()
