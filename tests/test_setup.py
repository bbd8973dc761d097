"""The setup behind the README's commands: installing a pyspark that uv has built already (pyspark
is published as a source distribution only) takes it from uv's cache, with no new build of it
(scripts/uv_install.py): setting up fresh clones again and again must not fill the disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import spark_lines  # scripts/, on the path by conftest
import uv_install

pytestmark = pytest.mark.system


def builds(cache: Path, release: str) -> set[Path]:
    """What uv's cache holds of the source distribution of pyspark `release`: one folder a
    build."""
    return {p for p in cache.glob(f"sdists-v*/*/pyspark/{release}/*") if p.is_dir()}


def test_a_second_install_of_a_built_pyspark_adds_nothing_to_uv_s_cache(tmp_path):
    release = spark_lines.tested_pyspark()[spark_lines.primary_line()]
    cache = Path(
        subprocess.run(
            [sys.executable, "-m", "uv", "cache", "dir"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    venvs = []
    for name in ("first", "second"):
        venv = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        venvs.append(venv)
    # The first install may build the release (a cache emptied since `make venv`); the second
    # must find that build.
    uv_install.install(str(venvs[0] / "bin" / "python"), "-q", f"pyspark=={release}")
    before = builds(cache, release)
    assert before, f"no build of pyspark {release} in uv's cache {cache}"
    uv_install.install(str(venvs[1] / "bin" / "python"), "-q", f"pyspark=={release}")
    assert builds(cache, release) == before
    for venv in venvs:
        code = "import pyspark; print(pyspark.__version__)"
        version = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True
        )
        assert version.stdout.strip() == release
