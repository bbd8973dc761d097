"""The benchmarks' summary: the machine they ran on and their headline figures, as
bench/results/summary.md and a chart, bench/results/summary.png (drawn with OpenCV, which the
project already uses, so no plotting package is needed). Reads the JSON figures the benchmark
scripts write next to their tables; run it after them (`make bench` does).

Usage: python bench/summary.py [--results bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine() -> dict[str, str]:
    """Cores, memory, CPU, OS and the versions of everything measured."""
    import onnxruntime
    import pyspark

    import mmlspark

    def first(path: str, key: str) -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "unknown"

    from mmlspark import _version

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cores": str(os.cpu_count()),
        "memory": first("/proc/meminfo", "MemTotal"),
        "cpu": first("/proc/cpuinfo", "model name"),
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "java": java.splitlines()[0] if java else "unknown",
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "mmlspark": mmlspark.__version__,
        "ONNX Runtime (Java)": _version.onnxruntime_version,
        "Scala": _version.scala_version,
        "onnxruntime (Python)": onnxruntime.__version__,
        "opencv-python": cv2.__version__,
        "GPU": "ONNXModel on CUDA not measured (no GPU machine with Java); see bench/README.md",
    }


def service_row(workload: str, r: dict) -> list[tuple[str, float, float | None]]:
    """mmlspark with the inference service against mmlspark without it, where both ran (none
    where they did not: not measured)."""
    rates = r["images_per_s"]
    if r.get("service_on_vs_off"):
        return [(f"{workload}: inference service on / off", fig(r, "service_on_vs_off"), None)]
    if rates.get("mmlspark_service_on"):  # "mmlspark" with the defaults: the service off on a CPU
        ratio = rates["mmlspark_service_on"] / rates["mmlspark"]
    elif rates.get("mmlspark_service_off"):  # older figures, whose "mmlspark" ran the service
        ratio = rates["mmlspark"] / rates["mmlspark_service_off"]
    else:
        return []
    return [(f"{workload}: inference service on / off", ratio, None)]


class Ratio(float):
    """A ratio of a benchmark's figures, with the range of its per-round ratios where the
    figures have it (bench/protocol.py)."""

    spread: str | None = None


def fig(r: dict, key: str) -> Ratio:
    """Figure `key` of `r`, with its range from `r["ratio_spreads"]` where there is one."""
    value = Ratio(r[key])
    spread = (r.get("ratio_spreads") or {}).get(key)
    if spread:
        value.spread = f"{spread['low']:.2f}-{spread['high']:.2f}"
    return value


def shown(value: float) -> str:
    """'0.94' or, with its range, '0.94 (0.90-0.97)'."""
    spread = getattr(value, "spread", None)
    return f"{value:.2f}" + (f" ({spread})" if spread else "")


# onnx_inference.py's models by the names the summary gives them.
MODEL_NAMES = {"resnet50": "ResNet-50", "tiny": "tiny CNN"}


def headline(results: Path) -> list[tuple[str, float, float | None]]:
    """(figure, value, target) rows from the JSON files present."""
    rows: list[tuple[str, float, float | None]] = []
    onnx = results / "onnx.json"
    if onnx.exists():
        for r in json.loads(onnx.read_text()):
            name = MODEL_NAMES.get(r["model"], r["model"])
            rows.append(
                (
                    f"{name}: ONNXModel / raw ORT Java",
                    fig(r, "ratio_vs_raw"),
                    0.95 if name == "ResNet-50" else 0.6,
                )
            )
            if r.get("service_on_vs_off"):
                ratio = fig(r, "service_on_vs_off")
                rows.append((f"{name}: inference service on / off", ratio, None))
            if r.get("pinned_vs_unpinned"):
                ratio = fig(r, "pinned_vs_unpinned")
                rows.append((f"{name}: pinned outputs on / off", ratio, None))
            if r.get("ratio_vs_predict_batch_udf"):
                target = 1.5 if name == "tiny CNN" else None
                rows.append(
                    (
                        f"{name}: ONNXModel / predict_batch_udf",
                        fig(r, "ratio_vs_predict_batch_udf"),
                        target,
                    )
                )
            if r.get("ratio_vs_synapseml"):
                target = 2.0 if name == "tiny CNN" else None
                rows.append(
                    (f"{name}: ONNXModel / SynapseML", fig(r, "ratio_vs_synapseml"), target)
                )
    e2e = results / "end_to_end.json"
    if e2e.exists():
        r = json.loads(e2e.read_text())
        rows.append(
            ("end to end: mmlspark / predict_batch_udf", fig(r, "ratio_vs_predict_batch_udf"), 1.5)
        )
        if r.get("ratio_vs_synapseml"):
            rows.append(("end to end: mmlspark / SynapseML", fig(r, "ratio_vs_synapseml"), 1.2))
        rows.append(("end to end: mmlspark / raw Python", fig(r, "ratio_vs_raw_python"), 1.0))
        rows += service_row("end to end", r)
    camera = results / "camera_trap.json"
    if camera.exists():
        r = json.loads(camera.read_text())
        rows.append(("12 MP photos: mmlspark / raw Python", fig(r, "ratio_vs_raw_python"), 1.0))
        if r.get("read_images_vs_raw_python") is not None:
            rows.append(
                (
                    "12 MP photos: read_images -> ImageTransformer / raw Python",
                    fig(r, "read_images_vs_raw_python"),
                    1.0,
                )
            )
        rows.append(
            (
                "12 MP photos: mmlspark / predict_batch_udf",
                fig(r, "ratio_vs_predict_batch_udf"),
                2.0,
            )
        )
        rates = r["images_per_s"]
        if r.get("raw_python_vs_predict_batch_udf"):
            ratio = fig(r, "raw_python_vs_predict_batch_udf")
            rows.append(("12 MP photos: raw Python / predict_batch_udf", ratio, None))
        elif rates.get("raw_python") and rates.get("predict_batch_udf"):
            # What mmlspark / predict_batch_udf would be at raw Python's rate.
            ratio = rates["raw_python"] / rates["predict_batch_udf"]
            rows.append(("12 MP photos: raw Python / predict_batch_udf", ratio, None))
        rows += service_row("12 MP photos", r)
        # The CLI's comparison, written by the whole benchmark and by `--only-cli` alike.
        cli = results / "camera_trap_cli.json"
        if cli.exists():
            r = json.loads(cli.read_text())
            r["ratio_spreads"] = {"cli_ratio_vs_raw_python": r["cli"]["ratio"]}
        if r.get("cli_ratio_vs_raw_python"):
            ratio = fig(r, "cli_ratio_vs_raw_python")
            rows.append(("12 MP photos: camera-trap CLI / raw Python", ratio, 0.8))
    detection = results / "detection.json"
    if detection.exists():
        r = json.loads(detection.read_text())
        rows.append(
            ("12 MP detection: mmlspark / raw Python", fig(r, "detector_vs_raw_python"), 1.0)
        )
        if r.get("read_images_detector_vs_raw_python"):
            ratio = fig(r, "read_images_detector_vs_raw_python")
            rows.append(("12 MP detection, read_images: mmlspark / raw Python", ratio, 1.0))
        rows += service_row("12 MP detection", r)
    images = results / "images.json"
    if images.exists():
        r = json.loads(images.read_text())
        rows.append(("image preprocessing: mmlspark / opencv-python", fig(r, "ratio"), 0.9))
    scaling = results / "scaling.json"
    if scaling.exists():
        r = json.loads(scaling.read_text())
        rows.append(("scaling: local[2] / local[1]", r["speedup_local2_vs_local1"], 1.8))
    return rows + python_backend(results)


# The Python backend's figures: (file, workload, key of its ratio to the JVM backend, key of its
# ratio to predict_batch_udf, that ratio's target: 1.2 on the end-to-end workloads).
PYTHON_BACKEND = [
    (
        "onnx.json",
        None,
        "python_backend_vs_jvm_backend",
        "python_backend_vs_predict_batch_udf",
        None,
    ),
    (
        "end_to_end.json",
        "end to end",
        "python_backend_vs_jvm_backend",
        "python_backend_vs_predict_batch_udf",
        1.2,
    ),
    (
        "camera_trap.json",
        "12 MP photos",
        "python_backend_vs_jvm_backend",
        "python_backend_vs_predict_batch_udf",
        1.2,
    ),
    (
        "camera_trap.json",
        "12 MP photos, read_images",
        "python_read_images_vs_jvm_read_images",
        "python_read_images_vs_predict_batch_udf",
        1.2,
    ),
    ("detection.json", "12 MP detection", "detector_python_backend_vs_jvm", None, None),
    (
        "detection.json",
        "12 MP detection, read_images",
        "python_read_images_vs_jvm_read_images",
        None,
        None,
    ),
    ("images.json", "image preprocessing", "python_backend_vs_jvm_backend", None, None),
    ("scaling.json", "scaling local[2]", "python_backend_vs_jvm_backend_local2", None, None),
]


def python_backend(results: Path) -> list[tuple[str, float, float | None]]:
    """The Python backend against the JVM backend (target 0.8 everywhere) and against
    predict_batch_udf, from the JSON files present."""
    rows: list[tuple[str, float, float | None]] = []
    for name, workload, vs_jvm, vs_udf, udf_target in PYTHON_BACKEND:
        path = results / name
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        for r in data if isinstance(data, list) else [data]:
            label = workload or MODEL_NAMES.get(r["model"], r["model"])
            if r.get(vs_jvm):
                rows.append((f"{label}: Python backend / JVM backend", fig(r, vs_jvm), 0.8))
            if vs_udf and r.get(vs_udf):
                rows.append(
                    (f"{label}: Python backend / predict_batch_udf", fig(r, vs_udf), udf_target)
                )
    return rows


def chart(rows: list[tuple[str, float, float | None]], path: Path) -> None:
    """Horizontal bars of each ratio, a tick at its target, green where met, red where not."""
    width, left, bar, gap = 1200, 400, 26, 14
    height = 70 + len(rows) * (bar + gap)
    top = max([v for _, v, _ in rows] + [t for _, _, t in rows if t] + [1.0]) * 1.1
    img = np.full((height, width, 3), 255, np.uint8)
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(img, "mmlspark benchmarks: ratios (1.0 = even)", (20, 32), font, 0.75, (0, 0, 0), 2)
    scale = (width - left - 190) / top
    x1 = left + int(1.0 * scale)
    cv2.line(img, (x1, 45), (x1, height - 10), (160, 160, 160), 1)
    for i, (label, value, target) in enumerate(rows):
        y = 55 + i * (bar + gap)
        met = target is None or value >= target
        color = (60, 160, 60) if met else (50, 50, 210)
        cv2.rectangle(img, (left, y), (left + int(value * scale), y + bar), color, -1)
        cv2.putText(img, label, (10, y + 18), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
        text = f"{value:.2f}" + (f" (target {target:g})" if target else "")
        cv2.putText(
            img,
            text,
            (left + int(max(value, target or 0.0) * scale) + 8, y + 18),
            font,
            0.45,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
        if target:
            xt = left + int(target * scale)
            cv2.line(img, (xt, y - 3), (xt, y + bar + 3), (0, 0, 0), 2)
    cv2.imwrite(str(path), img)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    results = Path(args.results)
    rows = headline(results)
    lines = ["# Benchmark summary", "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in machine().items()]
    lines += [
        "",
        "## Headline ratios",
        "",
        "| figure | value (range of the rounds) | target | met |",
        "|---|---|---|---|",
    ]
    for label, value, target in rows:
        met = "" if target is None else ("yes" if value >= target else "no")
        lines.append(f"| {label} | {shown(value)} | {'' if target is None else target} | {met} |")
    lines += ["", "Tables: onnx.md, end_to_end.md, scaling.md, images.md. Chart: summary.png.", ""]
    (results / "summary.md").write_text("\n".join(lines))
    chart(rows, results / "summary.png")
    print(json.dumps({"rows": len(rows)}))


if __name__ == "__main__":
    main()
