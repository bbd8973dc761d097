"""The benchmark harness runs (a smoke run: numbers are not checked, only that it works)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

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


@pytest.mark.system
def test_image_benchmark_quick_run_writes_its_table(tmp_path):
    out = tmp_path / "images.md"
    figures = quick_run("image_pipeline.py", out)
    assert figures["images"] == 40
    assert figures["mmlspark_images_per_s"] > 0 and figures["opencv_python_images_per_s"] > 0
    assert figures["mmlspark_python_backend_images_per_s"] > 0
    assert figures["python_backend_vs_jvm_backend"] > 0
    table = out.read_text()
    assert "| mmlspark (read_images + ImageTransformer, local[2]) |" in table
    assert "| mmlspark, Python backend (the same stages, local[2]) |" in table


@pytest.mark.system
def test_onnx_benchmark_quick_run_compares_with_raw_onnxruntime(tmp_path):
    out = tmp_path / "onnx.md"
    (figures,) = quick_run("onnx_inference.py", out)
    assert figures["model"] == "tiny" and figures["images"] == 256
    assert figures["mmlspark_images_per_s"] > 0 and figures["raw_ort_java_images_per_s"] > 0
    assert figures["raw_ort_python_images_per_s"] > 0
    assert figures["predict_batch_udf_images_per_s"] > 0
    assert figures["mmlspark_sessions_created"] == 1
    assert figures["mmlspark_service_off_images_per_s"] > 0
    assert figures["mmlspark_pinned_images_per_s"] > 0
    assert figures["mmlspark_unpinned_images_per_s"] > 0
    assert figures["pinned_vs_unpinned"] == pytest.approx(
        figures["mmlspark_pinned_images_per_s"] / figures["mmlspark_unpinned_images_per_s"]
    )
    assert figures["mmlspark_python_backend_images_per_s"] > 0
    for contender in ("jvm_backend", "raw_ort_python", "predict_batch_udf"):
        assert figures[f"python_backend_vs_{contender}"] > 0
    assert figures["python_backend_top_class_agreement"] >= 0.95
    assert "| tiny (" in out.read_text()


@pytest.mark.system
def test_scaling_benchmark_quick_run_measures_three_masters(tmp_path):
    out = tmp_path / "scaling.md"
    figures = quick_run("scaling.py", out)
    rates = figures["images_per_s"]
    assert set(rates) == {
        "local[1]",
        "local[2]",
        "standalone, 2 workers x 1 core",
        "local[1], Python backend",
        "local[2], Python backend",
    }
    assert all(rate > 0 for rate in rates.values())
    assert figures["python_backend_speedup_local2_vs_local1"] > 0
    assert "| local[2] |" in out.read_text()


@pytest.mark.system
def test_end_to_end_benchmark_quick_run_agrees_on_top_classes(tmp_path):
    out = tmp_path / "end_to_end.md"
    figures = quick_run("end_to_end.py", out)
    assert set(figures["images_per_s"]) == {
        "mmlspark",
        "mmlspark_service_off",
        "mmlspark_python_backend",
        "predict_batch_udf",
        "raw_python",
    }
    assert all(share >= 0.95 for share in figures["top_class_agreement_with_mmlspark"].values())
    assert "| predict_batch_udf |" in out.read_text()
    assert figures["python_backend_vs_jvm_backend"] > 0


@pytest.mark.system
def test_summary_lists_machine_and_ratios_against_targets_and_draws_them(tmp_path):
    (tmp_path / "onnx.json").write_text(
        json.dumps(
            [
                {
                    "model": "resnet50",
                    "ratio_vs_raw": 0.9,
                    "ratio_vs_predict_batch_udf": 1.1,
                    "python_backend_vs_jvm_backend": 0.85,
                    "python_backend_vs_predict_batch_udf": 0.93,
                },
                {
                    "model": "tiny",
                    "ratio_vs_raw": 0.5,
                    "ratio_vs_synapseml": 3.0,
                    "service_on_vs_off": 1.25,
                    "pinned_vs_unpinned": 1.04,
                },
            ]
        )
    )
    (tmp_path / "scaling.json").write_text(json.dumps({"speedup_local2_vs_local1": 1.9}))
    (tmp_path / "camera_trap.json").write_text(
        json.dumps(
            {
                "ratio_vs_raw_python": 0.77,
                "ratio_vs_predict_batch_udf": 1.13,
                "images_per_s": {"mmlspark": 11.5, "raw_python": 15.0, "predict_batch_udf": 10.0},
            }
        )
    )
    (tmp_path / "end_to_end.json").write_text(
        json.dumps(
            {
                "ratio_vs_predict_batch_udf": 1.4,
                "ratio_vs_raw_python": 0.8,
                "python_backend_vs_jvm_backend": 0.75,
                "python_backend_vs_predict_batch_udf": 1.25,
                "images_per_s": {"mmlspark": 40.0},
            }
        )
    )
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "summary.py"), "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = (tmp_path / "summary.md").read_text()
    assert "- cores: " in summary and "- ONNX Runtime (Java): " in summary
    assert "| ResNet-50: ONNXModel / raw ORT Java | 0.90 | 0.95 | no |" in summary
    assert "| tiny CNN: ONNXModel / SynapseML | 3.00 | 2.0 | yes |" in summary
    assert "| tiny CNN: ONNXModel / raw ORT Java | 0.50 | 0.6 | no |" in summary
    assert "| tiny CNN: inference service on / off | 1.25 |  |  |" in summary
    assert "| tiny CNN: pinned outputs on / off | 1.04 |  |  |" in summary
    assert "| scaling: local[2] / local[1] | 1.90 | 1.8 | yes |" in summary
    # Beside mmlspark / predict_batch_udf, what raw Python reaches against it (no target).
    assert "| 12 MP photos: mmlspark / predict_batch_udf | 1.13 | 2.0 | no |" in summary
    assert "| 12 MP photos: raw Python / predict_batch_udf | 1.50 |  |  |" in summary
    # The Python backend: against the JVM backend (target 0.8) and predict_batch_udf (1.2 on the
    # end-to-end workloads, none on the model alone).
    assert "| ResNet-50: Python backend / JVM backend | 0.85 | 0.8 | yes |" in summary
    assert "| ResNet-50: Python backend / predict_batch_udf | 0.93 |  |  |" in summary
    assert "| end to end: Python backend / JVM backend | 0.75 | 0.8 | no |" in summary
    assert "| end to end: Python backend / predict_batch_udf | 1.25 | 1.2 | yes |" in summary
    image = cv2.imread(str(tmp_path / "summary.png"))
    assert image is not None and image.shape[1] == 1200
    red = (image[:, :, 2] > 180) & (image[:, :, 1] < 80)  # bars of missed targets
    green = (image[:, :, 1] > 140) & (image[:, :, 2] < 90)  # bars of met targets
    assert red.any() and green.any()


@pytest.mark.system
def test_camera_trap_benchmark_quick_run_agrees_on_top_classes(tmp_path):
    out = tmp_path / "camera_trap.md"
    figures = quick_run("camera_trap.py", out)
    assert figures["images"] == 4 and figures["photo"].startswith("4000x3000 JPEG")
    assert set(figures["images_per_s"]) == {
        "mmlspark",
        "mmlspark_service_off",
        "mmlspark_python_backend",
        "mmlspark_read_images",
        "mmlspark_read_images_full_decode",
        "predict_batch_udf",
        "raw_python",
    }
    assert all(rate > 0 for rate in figures["images_per_s"].values())
    assert all(share >= 0.95 for share in figures["top_class_agreement_with_mmlspark"].values())
    assert figures["peak_jvm_rss_mb"]["mmlspark"] > 0
    assert figures["top_class_agreement_with_mmlspark"]["mmlspark_python_backend"] >= 0.95
    assert figures["top_class_agreement_with_mmlspark"]["mmlspark_read_images"] >= 0.95


def test_camera_trap_benchmark_takes_the_cli_rate_only_of_the_whole_survey():
    sys.path.insert(0, str(ROOT / "bench"))
    from camera_trap import cli_rate

    line = (
        "[classify] 960 photos (0 failures) in /tmp/out; this run {} photos in 108.2 s"
        " ({} photos/s)"
    )
    assert cli_rate("log\n" + line.format(960, 8.9), 960) == 8.9
    # A survey the job lists as fewer photos (a file reached by two links is listed once) is not
    # the survey measured.
    with pytest.raises(RuntimeError, match="scored 96 photos, not the survey's 960"):
        cli_rate(line.format(96, 4.0), 960)
    with pytest.raises(RuntimeError, match="no summary line"):
        cli_rate("[classify] stopped", 960)


@pytest.mark.system
def test_profile_splits_the_cpu_of_both_workloads_by_thread_and_phase(tmp_path):
    out = tmp_path / "where_time_goes.md"
    figures = quick_run("where_time_goes.py", out)
    assert (figures["images"], figures["jpegs"]) == (8, 40)
    for workload, peer in (("camera_trap", "raw_python"), ("preprocessing", "opencv_python")):
        for contender in ("mmlspark", peer):
            assert figures[workload][contender]["photos_per_s"] > 0
            assert figures[workload][contender]["cpu_s_per_photo"] > 0
        threads = figures[workload]["mmlspark"]["thread_cpu_s_per_photo"]
        # The task threads read and decode every photo; the threads' CPU is the JVM's, or less
        # (threads that ended are not counted).
        assert threads["task threads (read, decode, transform, rows)"] > 0
        assert sum(threads.values()) <= figures[workload]["mmlspark"]["cpu_s_per_photo"] * 1.05
    # Only the camera-trap workload has a model: the inference service's workers run it.
    camera = figures["camera_trap"]
    assert camera["mmlspark"]["thread_cpu_s_per_photo"]["inference service (batches, model)"] > 0
    phases = camera["raw_python"]["phase_cpu_s_per_photo"]
    assert sum(phases.values()) == pytest.approx(camera["raw_python"]["cpu_s_per_photo"])
    assert "## 8 photos of 4000x3000" in out.read_text()


@pytest.mark.system
def test_detection_benchmark_quick_run_finds_the_same_boxes(tmp_path):
    out = tmp_path / "detection.md"
    figures = quick_run("detection.py", out)
    assert figures["images"] == 4
    assert set(figures["images_per_s"]) == {
        "detector_mmlspark",
        "detector_mmlspark_python_backend",
        "detector_raw_python",
        "whole_image_classification_mmlspark",
    }
    assert all(rate > 0 for rate in figures["images_per_s"].values())
    assert figures["same_box_count_share"] >= 0.9
    assert figures["python_backend_same_box_count_share"] >= 0.9
    assert figures["detector_python_backend_vs_jvm"] > 0
    assert figures["detector_python_backend_vs_raw_python"] > 0
    assert (tmp_path / "detection.json").is_file() and out.is_file()
