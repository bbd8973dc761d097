"""The benchmark harness runs (a smoke run: numbers are not checked, only that it works)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_image_benchmark_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "images.md"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "image_pipeline.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["images"] == 40
    assert figures["mmlspark_images_per_s"] > 0 and figures["opencv_python_images_per_s"] > 0
    table = out.read_text()
    assert "| mmlspark (read_images + ImageTransformer, local[2]) |" in table
