"""Type checkers read the generated wrappers' hints (inline, with py.typed)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = textwrap.dedent(
    """
    from mmlspark.stages import ClassBalancer, MiniBatchTransformer, SelectColumns, Timer

    stage = SelectColumns(cols=["a"])
    reveal_type(stage.getCols())
    reveal_type(stage.setCols(["b"]))
    reveal_type(MiniBatchTransformer().getMiniBatchSize())
    reveal_type(ClassBalancer().getInputCol())
    reveal_type(Timer().getMaterialize())
    SelectColumns(cols=5)
    SelectColumns(["positional"])
    """
)


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.system
def test_package_type_checks_clean():
    result = _mypy("mmlspark")
    assert result.returncode == 0, result.stdout


@pytest.mark.system
def test_generated_signatures_are_seen_by_mypy(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    out = _mypy("--follow-imports=silent", str(sample)).stdout
    assert 'Revealed type is "list[str]"' in out
    # the setter returns the stage's own class (hand-written wrappers live in their modules)
    assert re.search(r'Revealed type is "mmlspark\.stages\.(select_columns\.)?SelectColumns"', out)
    assert 'Revealed type is "int"' in out
    assert 'Revealed type is "str"' in out
    assert 'Revealed type is "bool"' in out
    assert 'Argument "cols" to "SelectColumns" has incompatible type "int"' in out
    assert "Too many positional arguments" in out
