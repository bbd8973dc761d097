"""The benchmark harness runs (a smoke run: numbers are not checked, only that it works)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_run(script: str, out: Path) -> dict | list:
    """Runs `bench/<script> --quick --out OUT` and returns the figures it prints last."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_image_benchmark_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "images.md"
    figures = quick_run("image_pipeline.py", out)
    assert figures["images"] == 40
    assert figures["mmlspark_images_per_s"] > 0 and figures["opencv_python_images_per_s"] > 0
    table = out.read_text()
    assert "| mmlspark (read_images + ImageTransformer, local[2]) |" in table


def test_onnx_benchmark_quick_run_compares_with_raw_onnxruntime(tmp_path):
    out = tmp_path / "onnx.md"
    (figures,) = quick_run("onnx_inference.py", out)
    assert figures["model"] == "tiny" and figures["images"] == 256
    assert figures["mmlspark_images_per_s"] > 0 and figures["raw_ort_java_images_per_s"] > 0
    assert figures["raw_ort_python_images_per_s"] > 0
    assert figures["predict_batch_udf_images_per_s"] > 0
    assert figures["mmlspark_sessions_created"] == 1
    assert "| tiny (" in out.read_text()


def test_scaling_benchmark_quick_run_measures_three_masters(tmp_path):
    out = tmp_path / "scaling.md"
    figures = quick_run("scaling.py", out)
    rates = figures["images_per_s"]
    assert set(rates) == {"local[1]", "local[2]", "standalone, 2 workers x 1 core"}
    assert all(rate > 0 for rate in rates.values())
    assert "| local[2] |" in out.read_text()


def test_end_to_end_benchmark_quick_run_agrees_on_top_classes(tmp_path):
    out = tmp_path / "end_to_end.md"
    figures = quick_run("end_to_end.py", out)
    assert set(figures["images_per_s"]) == {"mmlspark", "predict_batch_udf", "raw_python"}
    assert all(share >= 0.95 for share in figures["top_class_agreement_with_mmlspark"].values())
    assert "| predict_batch_udf |" in out.read_text()
