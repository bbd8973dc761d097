"""One local SparkSession with the mmlspark jar for the whole test run."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import mmlspark
from mmlspark.core.wrapper import MMLParams


@pytest.fixture(scope="session")
def spark():
    session = mmlspark.session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
        },  # the heap is mmlspark.session()'s default, as users get it
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def generated_classes() -> list[type[MMLParams]]:
    """Every public wrapper class of every mmlspark area package."""
    found = {}
    for info in pkgutil.iter_modules(mmlspark.__path__):
        if info.name.startswith("_") or not info.ispkg or info.name in ("core", "jars"):
            continue
        module = importlib.import_module(f"mmlspark.{info.name}")
        for name in getattr(module, "__all__", []):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, MMLParams):
                found[cls._java_class_name] = cls
    return [found[k] for k in sorted(found)]


def run_job(
    tmp_path: Path, script: str, argument: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs `script` in a Python process of its own (a session with its own settings, such as a
    local cluster) as `job.py ARGUMENT TESTS_DIR`, and checks that it succeeds."""
    path = tmp_path / "job.py"
    path.write_text(script)
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, str(path), argument, str(root / "tests")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result
