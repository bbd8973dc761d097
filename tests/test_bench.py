"""The benchmark harness runs. Every benchmark's quick (smoke) mode runs once, all of them in
one process (bench/quick.py: one Python interpreter, one JVM); the rates are not checked, only
that they are there, but what the contenders compute is: against each other, and against
references computed here with onnxruntime and opencv-python from the same seeded inputs."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import onnxruntime as ort
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent


def bench(module: str) -> ModuleType:
    """A module of bench/ (the benchmarks import each other from their folder)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module(module)


def quick_run_of(benchmark: str) -> Callable:
    """Marks a test as one that checks the quick run of bench/<benchmark>.py (see quick_runs)."""

    def mark(test: Callable) -> Callable:
        test.benchmark = benchmark  # type: ignore[attr-defined]
        return test

    return mark


@pytest.fixture(scope="module")
def quick_runs(request, tmp_path_factory) -> dict:
    return run_quick(request, tmp_path_factory)


def run_quick(request, tmp_path_factory) -> dict:
    """The quick runs of the benchmarks whose tests in this module are selected, all in one
    process, once: bench/quick.py's figures, errors and seconds, and `out`, the folder of their
    tables. The scaling benchmark measures on the suite's standalone cluster (its test is in
    test_bench_scaling.py, which make test runs in the chain that starts that cluster)."""
    names = {
        getattr(getattr(item, "function", None), "benchmark", None)
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    }
    names.discard(None)
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, str(ROOT / "bench" / "quick.py"), "--out", str(out), *sorted(names)]
    if "scaling" in names:  # on the suite's standalone cluster instead of one of its own
        command[2:2] = ["--standalone", request.getfixturevalue("standalone_cluster").master_url]
    # A session of its own, so that a run past its time goes with the JVM and the processes it
    # started.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"bench/quick.py ran past 900 s:\n{stderr[-4000:]}")
    lines = stdout.strip().splitlines()
    # 1: some benchmark failed (its tests say which); anything else: the runner itself did.
    assert process.returncode in (0, 1) and lines, stderr[-4000:]
    return {**json.loads(lines[-1]), "out": out}


def figures_of(runs: dict, benchmark: str):
    """The figures of `benchmark`'s quick run, or the test's failure with its error."""
    if benchmark in runs["errors"]:
        pytest.fail(f"bench/{benchmark}.py --quick failed:\n{runs['errors'][benchmark][-6000:]}")
    return runs["figures"][benchmark]


def reference_logits(model: bytes, seed: int, images: int) -> dict:
    """onnxruntime's logits of the seeded tensors the benchmarks feed `model` (standard normal
    float32 from numpy's default_rng(seed)), digested as onnx_inference.logit_digest says: the
    sum of their absolute values, and their sum weighted by standard normal weights from numpy's
    default_rng(0), one per image and class."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name, shape = session.get_inputs()[0].name, session.get_inputs()[0].shape
    rng = np.random.default_rng(seed)
    tensors = rng.standard_normal((images, *shape[1:]), dtype=np.float32)
    logits = session.run(None, {name: tensors})[0].astype(np.float64)
    weights = np.random.default_rng(0).standard_normal(logits.shape)
    return {
        "images": images,
        "abs_sum": float(np.abs(logits).sum()),
        "weighted_sum": float((weights * logits).sum()),
    }


def assert_same_logits(digest: dict, expected: dict, where: str) -> None:
    assert digest["images"] == expected["images"], where
    # Float rounding that differs with the batch moves the sums by about 1e-7 of their scale;
    # two images' logits swapped move the weighted one by about 1e-4 (the tiny CNN's logits differ
    # little from image to image).
    tolerance = 1e-5 * expected["abs_sum"]
    assert digest["abs_sum"] == pytest.approx(expected["abs_sum"], abs=tolerance), where
    assert digest["weighted_sum"] == pytest.approx(expected["weighted_sum"], abs=tolerance), where


def reference_top_classes(model: bytes, paths: list[Path], preprocess) -> dict[str, int]:
    """The top class onnxruntime gives each photo of `paths`, preprocessed by `preprocess`
    (opencv-python: encoded bytes -> CHW float32)."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name, shape = session.get_inputs()[0].name, session.get_inputs()[0].shape
    batch = np.stack([preprocess(np.fromfile(p, np.uint8)) for p in paths]).reshape(-1, *shape[1:])
    tops = session.run(None, {name: batch})[0].argmax(axis=1)
    return {p.name: int(t) for p, t in zip(paths, tops, strict=True)}


def assert_agree_with_reference(tops: dict[str, int], expected: dict[str, int]) -> None:
    """Nearly every photo gets onnxruntime's top class (random-weight logits can tie to the last
    bits), and the photos do not all get one class (else agreeing would prove little)."""
    assert set(tops) == set(expected)
    share = sum(tops[k] == expected[k] for k in expected) / len(expected)
    assert share >= 0.95, (tops, expected)
    assert len(set(expected.values())) >= 2, expected


@pytest.mark.system
@quick_run_of("image_pipeline")
def test_image_benchmark_quick_run_writes_its_table(quick_runs, tmp_path):
    out = quick_runs["out"] / "images.md"
    figures = figures_of(quick_runs, "image_pipeline")
    assert figures["images"] == 40
    assert figures["mmlspark_images_per_s"] > 0 and figures["opencv_python_images_per_s"] > 0
    assert figures["mmlspark_python_backend_images_per_s"] > 0
    assert figures["python_backend_vs_jvm_backend"] > 0
    # The tensors both backends made, against opencv-python's of the same JPEGs (made again from
    # the same seed).
    image_pipeline = bench("image_pipeline")
    paths = image_pipeline.make_jpegs(tmp_path, 40)
    tensors = np.stack([image_pipeline.preprocess(np.fromfile(p, np.uint8)) for p in paths])
    tensors = tensors.reshape(40, 3, -1).astype(np.float64)
    for backend, digest in figures["tensor_digests"].items():
        assert digest["images"] == 40, backend
        assert digest["channel_means"] == pytest.approx(tensors.mean(axis=(0, 2)), abs=1e-5)
        assert digest["abs_mean"] == pytest.approx(np.abs(tensors).mean(), rel=1e-5), backend
    assert set(figures["tensor_digests"]) == {"mmlspark", "mmlspark_python_backend"}
    table = out.read_text()
    assert "| mmlspark (read_images + ImageTransformer, local[2]) |" in table
    assert "| mmlspark, Python backend (the same stages, local[2]) |" in table


@pytest.mark.system
@quick_run_of("onnx_inference")
def test_onnx_benchmark_quick_run_compares_with_raw_onnxruntime(quick_runs):
    out = quick_runs["out"] / "onnx.md"
    (figures,) = figures_of(quick_runs, "onnx_inference")
    assert figures["model"] == "tiny" and figures["images"] == 256
    assert figures["mmlspark_images_per_s"] > 0 and figures["raw_ort_java_images_per_s"] > 0
    assert figures["raw_ort_python_images_per_s"] > 0
    assert figures["predict_batch_udf_images_per_s"] > 0
    # One ONNX Runtime session per settings for all rounds and tasks: the tasks' own with the
    # defaults (the service off on a CPU), which pinned outputs share, and the inference service's
    # (threads that do not spin) with the service on.
    assert figures["mmlspark_sessions_created"] == 2
    assert figures["mmlspark_service_on_images_per_s"] > 0
    assert figures["mmlspark_pinned_images_per_s"] > 0
    # The defaults' outputs are the unpinned ones on a CPU.
    assert figures["mmlspark_unpinned_images_per_s"] == figures["mmlspark_images_per_s"]
    # ONNXModel's logits with its output buffers pinned and unpinned, against onnxruntime's of
    # the same model and the same seeded tensors.
    model = bench("models").tiny_cnn()
    assert hashlib.sha256(model).hexdigest() == figures["model_sha256"]
    expected = reference_logits(model, figures["tensor_seed"], 256)
    for run in ("mmlspark_pinned_logits", "mmlspark_unpinned_logits"):
        assert_same_logits(figures[run], expected, run)
    assert figures["mmlspark_python_backend_images_per_s"] > 0
    for contender in ("jvm_backend", "raw_ort_python", "predict_batch_udf"):
        assert figures[f"python_backend_vs_{contender}"] > 0
    assert figures["python_backend_top_class_agreement"] >= 0.95
    # One protocol for every contender, raw ONNX Runtime Java (another JVM) among them: one
    # round in quick mode, so each ratio is the ratio of the two rates.
    assert figures["rounds"] == 1
    assert set(figures["spreads"]) == {
        "mmlspark",
        "mmlspark, service on",
        "mmlspark, outputs pinned",
        "mmlspark, Python backend",
        "predict_batch_udf",
        "raw ORT Python",
        "raw ORT Java",
    }
    assert figures["ratio_vs_raw"] == pytest.approx(
        figures["mmlspark_images_per_s"] / figures["raw_ort_java_images_per_s"]
    )
    # On / off: the contender beside the headline (the defaults, both off) over the headline.
    assert figures["service_on_vs_off"] == pytest.approx(
        figures["mmlspark_service_on_images_per_s"] / figures["mmlspark_images_per_s"]
    )
    assert figures["pinned_vs_unpinned"] == pytest.approx(
        figures["mmlspark_pinned_images_per_s"] / figures["mmlspark_unpinned_images_per_s"]
    )
    assert "| tiny (" in out.read_text()


@pytest.mark.system
@quick_run_of("end_to_end")
def test_end_to_end_benchmark_quick_run_agrees_on_top_classes(quick_runs, tmp_path):
    out = quick_runs["out"] / "end_to_end.md"
    figures = figures_of(quick_runs, "end_to_end")
    assert set(figures["images_per_s"]) == {
        "mmlspark",
        "mmlspark_service_on",
        "mmlspark_python_backend",
        "predict_batch_udf",
        "raw_python",
    }
    rates = figures["images_per_s"]
    assert figures["service_on_vs_off"] == pytest.approx(
        rates["mmlspark_service_on"] / rates["mmlspark"]
    )
    assert all(share >= 0.95 for share in figures["top_class_agreement_with_mmlspark"].values())
    assert "| predict_batch_udf |" in out.read_text()
    assert figures["python_backend_vs_jvm_backend"] > 0
    # mmlspark's top classes, against onnxruntime's of opencv-python's tensors of the same JPEGs.
    image_pipeline = bench("image_pipeline")
    paths = image_pipeline.make_jpegs(tmp_path, 16)
    expected = reference_top_classes(
        bench("models").quick_classifier(), paths, image_pipeline.preprocess
    )
    assert_agree_with_reference(figures["mmlspark_top_classes"], expected)


@pytest.mark.system
def test_summary_lists_machine_and_ratios_against_targets_and_draws_them(tmp_path):
    (tmp_path / "onnx.json").write_text(
        json.dumps(
            [
                {
                    "model": "resnet50",
                    "ratio_vs_raw": 0.9,
                    "ratio_spreads": {"ratio_vs_raw": {"median": 0.9, "low": 0.85, "high": 0.95}},
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
                "images_per_s": {
                    "mmlspark": 11.5,
                    "mmlspark_service_on": 12.65,
                    "raw_python": 15.0,
                    "predict_batch_udf": 10.0,
                },
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
                # Figures written before the headline ran the defaults: its "mmlspark" ran the
                # service, the contender beside it did not.
                "images_per_s": {"mmlspark": 40.0, "mmlspark_service_off": 50.0},
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
    # With the range of its per-round ratios where the figures have one.
    assert "| ResNet-50: ONNXModel / raw ORT Java | 0.90 (0.85-0.95) | 0.95 | no |" in summary
    assert "| tiny CNN: ONNXModel / SynapseML | 3.00 | 2.0 | yes |" in summary
    assert "| tiny CNN: ONNXModel / raw ORT Java | 0.50 | 0.6 | no |" in summary
    assert "| tiny CNN: inference service on / off | 1.25 |  |  |" in summary
    assert "| tiny CNN: pinned outputs on / off | 1.04 |  |  |" in summary
    # On / off from the rates where a benchmark's figures lack the ratio: the contender beside the
    # headline over it, or, in older figures, the headline over the contender beside it.
    assert "| 12 MP photos: inference service on / off | 1.10 |  |  |" in summary
    assert "| end to end: inference service on / off | 0.80 |  |  |" in summary
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
@quick_run_of("camera_trap")
def test_camera_trap_benchmark_quick_run_agrees_on_top_classes(quick_runs, tmp_path):
    figures = figures_of(quick_runs, "camera_trap")
    assert figures["images"] == 4 and figures["photo"].startswith("4000x3000 JPEG")
    assert set(figures["images_per_s"]) == {
        "mmlspark",
        "mmlspark_service_on",
        "mmlspark_python_backend",
        "mmlspark_read_images",
        "mmlspark_python_read_images",
        "mmlspark_read_images_full_decode",
        "predict_batch_udf",
        "raw_python",
    }
    assert all(rate > 0 for rate in figures["images_per_s"].values())
    assert all(share >= 0.95 for share in figures["top_class_agreement_with_mmlspark"].values())
    assert 0 < figures["peak_jvm_rss_mb"]["mmlspark"] < psutil.virtual_memory().total / 1e6
    assert figures["top_class_agreement_with_mmlspark"]["mmlspark_python_backend"] >= 0.95
    assert figures["top_class_agreement_with_mmlspark"]["mmlspark_read_images"] >= 0.95
    assert figures["top_class_agreement_with_mmlspark"]["mmlspark_python_read_images"] >= 0.95
    # mmlspark's top classes, against onnxruntime's of opencv-python's tensors of the same photos.
    camera_trap = bench("camera_trap")
    paths = camera_trap.make_photos(tmp_path, 4)
    expected = reference_top_classes(
        bench("models").quick_classifier(), paths, camera_trap.preprocess
    )
    assert_agree_with_reference(figures["mmlspark_top_classes"], expected)
    assert (quick_runs["out"] / "camera_trap.md").is_file()


def test_camera_trap_benchmark_takes_the_cli_rate_only_of_the_whole_survey():
    cli_rate = bench("camera_trap").cli_rate

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


def test_camera_trap_benchmark_survey_holds_distinct_12_megapixel_photos(tmp_path):
    paths = bench("camera_trap").make_survey(tmp_path, 3)
    assert len(paths) == 3 and all(p.is_relative_to(tmp_path) for p in paths)
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}) == 3
    shapes = {cv2.imread(str(p), cv2.IMREAD_REDUCED_COLOR_8).shape for p in paths}
    assert shapes == {(375, 500, 3)}  # 4000x3000 at 1/8


@pytest.mark.system
@quick_run_of("where_time_goes")
def test_profile_splits_the_cpu_of_both_workloads_by_thread_and_phase(quick_runs):
    out = quick_runs["out"] / "where_time_goes.md"
    figures = figures_of(quick_runs, "where_time_goes")
    assert (figures["images"], figures["jpegs"]) == (8, 40)
    for workload, peer in (("camera_trap", "raw_python"), ("preprocessing", "opencv_python")):
        for contender in ("mmlspark", peer):
            assert figures[workload][contender]["photos_per_s"] > 0
            assert figures[workload][contender]["cpu_s_per_photo"] > 0
        threads = figures[workload]["mmlspark"]["thread_cpu_s_per_photo"]
        # The task threads read and decode every photo; the threads' CPU is the JVM's, or less
        # (threads that ended are not counted).
        assert threads["task threads (read, decode, transform, model, rows)"] > 0
        assert sum(threads.values()) <= figures[workload]["mmlspark"]["cpu_s_per_photo"] * 1.05
    # The profile runs the defaults, as camera_trap.py's "mmlspark": on a CPU the inference
    # service is off, so its workers (left idle by the benchmarks run before in the same JVM, if
    # any) take no CPU, and the task threads run the model themselves: most of the JVM's CPU on
    # the workload with a model (with the service on they had about a third).
    camera = figures["camera_trap"]
    task_threads = "task threads (read, decode, transform, model, rows)"
    for workload in ("camera_trap", "preprocessing"):
        threads = figures[workload]["mmlspark"]["thread_cpu_s_per_photo"]
        service = threads.get("inference service (batches, model)", 0.0)
        assert service <= 0.01 * threads[task_threads], (workload, threads)
    tasks = camera["mmlspark"]["thread_cpu_s_per_photo"][task_threads]
    assert tasks >= 0.6 * camera["mmlspark"]["cpu_s_per_photo"], camera["mmlspark"]
    raw = camera["raw_python"]
    phases = raw["phase_cpu_s_per_photo"]
    assert set(phases) == {"decode and transform (2 threads)", "model (onnxruntime, 2 threads)"}
    assert all(seconds > 0 for seconds in phases.values())
    # The phases, measured apart with psutil, add up to the process's CPU over both on the
    # kernel's own clock (time.process_time; psutil counts in 10 ms ticks), and to no more than
    # this machine's cores give in their wall time.
    assert sum(phases.values()) == pytest.approx(
        raw["process_clock_cpu_s_per_photo"], rel=0.1, abs=0.01
    )
    assert sum(phases.values()) <= psutil.cpu_count() / raw["photos_per_s"] * 1.05 + 0.01
    assert "## 8 photos of 4000x3000" in out.read_text()


@pytest.mark.system
@quick_run_of("detection")
def test_detection_benchmark_quick_run_finds_the_same_boxes(quick_runs):
    out = quick_runs["out"] / "detection.md"
    figures = figures_of(quick_runs, "detection")
    assert figures["images"] == 4
    assert set(figures["images_per_s"]) == {
        "detector_mmlspark",
        "detector_mmlspark_service_off",
        "detector_mmlspark_python_backend",
        "detector_mmlspark_read_images",
        "detector_mmlspark_python_read_images",
        "detector_raw_python",
        "whole_image_classification_mmlspark",
    }
    rates = figures["images_per_s"]
    assert all(rate > 0 for rate in rates.values())
    # One round: the median of the per-round ratios is the ratio of the rates.
    on, off = rates["detector_mmlspark"], rates["detector_mmlspark_service_off"]
    assert figures["service_on_vs_off"] == pytest.approx(on / off)
    # Boxes are found at all, so that the contenders' agreeing on their count says something.
    assert figures["boxes_per_photo"] >= 1
    assert figures["same_detections_share"] >= 0.9
    assert figures["python_backend_same_detections_share"] >= 0.9
    assert figures["read_images_same_detections_share"] >= 0.9
    assert figures["python_read_images_same_detections_share"] >= 0.9
    assert figures["read_images_detector_vs_raw_python"] > 0
    assert figures["python_read_images_vs_jvm_read_images"] > 0
    assert figures["detector_python_backend_vs_jvm"] > 0
    assert figures["detector_python_backend_vs_raw_python"] > 0
    assert (quick_runs["out"] / "detection.json").is_file() and out.is_file()
