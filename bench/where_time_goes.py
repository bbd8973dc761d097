"""Profile: where the CPU goes in two workloads whose targets mmlspark misses, each mmlspark
against its raw peer, one timed run of each after a warm-up:
  - the camera-trap workload of bench/camera_trap.py (4000x3000 JPEGs -> decode at 1/8 ->
    224x224 -> normalize -> ResNet-50 architecture -> top class): mmlspark (binaryFile ->
    ImageTransformer with the fused, reduced decode -> ONNXModel with the defaults a user gets, as
    camera_trap.py's "mmlspark", local[2]) against raw Python (opencv-python in two threads, then
    onnxruntime with two intra-op threads), whose two phases are timed apart;
  - the image preprocessing of bench/image_pipeline.py (640x480 JPEGs -> 224x224 tensors):
    mmlspark (read_images -> ImageTransformer, local[2]) against opencv-python in two processes.
For each: the rate, the CPU seconds per photo and how many of the two cores were busy on
average; for mmlspark also the CPU seconds per photo of each kind of JVM thread (from
/proc/<pid>/task: the task threads, which read, decode, transform and, with the defaults on a CPU
(the inference service off), run the model on one intra-op thread each; the inference service's
workers, which fill the batches and run the model where the service is set on (idle or none here);
garbage collection; the JIT compilers; the rest), and for raw Python the CPU seconds per photo
of each phase (psutil) beside those of the whole process over both phases on the kernel's own
process clock (time.process_time), a second measure to hold the phases against. Writes
bench/results/where_time_goes.md and .json. Not a test.

Usage: python bench/where_time_goes.py [--images N] [--jpegs N] [--warmups N] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import image_pipeline  # noqa: E402
import models  # noqa: E402
from camera_trap import BATCH, SIZE, make_photos, onnx_stage, preprocess, transformer  # noqa: E402
from onnx_inference import save_figures  # noqa: E402

#: Kinds of JVM threads, by the start of their name as Linux keeps it (15 characters).
THREADS = [
    ("Executor task", "task threads (read, decode, transform, model, rows)"),
    ("mmlspark-onnx-i", "inference service (batches, model)"),
    ("GC Thread", "garbage collection"),
    ("G1 ", "garbage collection"),
    ("C1 CompilerThre", "JIT compilers"),
    ("C2 CompilerThre", "JIT compilers"),
]


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the threads of process `pid` by kind (the rest under 'other threads');
    empty where the system has no /proc (the split is then left out)."""
    ticks = os.sysconf("SC_CLK_TCK")
    kinds: dict[str, float] = {}
    tasks = Path(f"/proc/{pid}/task")
    for task in tasks.iterdir() if tasks.is_dir() else []:
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        label = next((k for prefix, k in THREADS if name.startswith(prefix)), "other threads")
        kinds[label] = kinds.get(label, 0.0) + seconds
    return kinds


def cpu_seconds(processes: list[psutil.Process]) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in processes)


def measured(processes: list[psutil.Process], run) -> tuple[float, float]:
    """Wall and CPU seconds (of `processes`) of one call of `run`."""
    cpu, start = cpu_seconds(processes), time.perf_counter()
    run()
    return time.perf_counter() - start, cpu_seconds(processes) - cpu


def timed(processes: list[psutil.Process], run, images: int, warmups: int = 1) -> dict:
    """One timed call of `run` after `warmups` calls, its CPU that of `processes`."""
    for _ in range(warmups):  # sessions, JIT
        run()
    wall, cpu = measured(processes, run)
    return {
        "photos_per_s": images / wall,
        "cpu_s_per_photo": cpu / images,
        "busy_cores": cpu / wall,
    }


def profiled(jvm: psutil.Process, run, images: int, warmups: int) -> dict:
    """`timed` on the JVM, with the CPU of its threads by kind."""
    for _ in range(warmups):
        run()
    before = thread_cpu(jvm.pid)
    figures = timed([jvm], run, images, warmups=0)
    after = thread_cpu(jvm.pid)
    figures["thread_cpu_s_per_photo"] = {
        k: (after[k] - before.get(k, 0.0)) / images for k in sorted(after, key=after.get)
    }
    return figures


def camera_trap(spark, jvm: psutil.Process, folder: Path, images: int, warmups: int) -> dict:
    """The 12 MP workload: mmlspark against opencv-python in two threads and onnxruntime."""
    import onnxruntime as ort

    paths = make_photos(folder / "photos", images)
    model = models.resnet50()
    files = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    stage = onnx_stage(model)
    scored = stage.transform(transformer("content").transform(files.load(str(folder / "photos"))))

    def mmlspark_run() -> None:
        scored.select("path", "top").write.format("noop").mode("overwrite").save()

    figures = {"mmlspark": profiled(jvm, mmlspark_run, images, warmups)}
    model_path = folder / "resnet50.onnx"
    model_path.write_bytes(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    tensors: list = []

    def raw_preprocess() -> None:
        with ThreadPoolExecutor(2) as pool:
            tensors[:] = pool.map(lambda p: preprocess(np.fromfile(p, np.uint8)), paths)

    def raw_infer() -> None:
        for start in range(0, len(paths), BATCH):
            batch = np.stack(tensors[start : start + BATCH]).reshape(-1, 3, SIZE, SIZE)
            session.run(None, {"image": batch})[0].argmax(axis=1)

    # Raw Python runs its two phases one after the other: timed apart, then added up.
    this = [psutil.Process()]
    raw_preprocess()  # warm-up: the tensors raw_infer's warm-up reads
    raw_infer()
    process_clock = time.process_time()
    prepared = timed(this, raw_preprocess, images, warmups=0)
    inferred = timed(this, raw_infer, images, warmups=0)
    process_s = (time.process_time() - process_clock) / images
    prepare_s = prepared["cpu_s_per_photo"]
    infer_s = inferred["cpu_s_per_photo"]
    seconds_per_photo = 1 / prepared["photos_per_s"] + 1 / inferred["photos_per_s"]
    figures["raw_python"] = {
        "photos_per_s": 1 / seconds_per_photo,
        "cpu_s_per_photo": prepare_s + infer_s,
        "busy_cores": (prepare_s + infer_s) / seconds_per_photo,
        "phase_cpu_s_per_photo": {
            "decode and transform (2 threads)": prepare_s,
            "model (onnxruntime, 2 threads)": infer_s,
        },
        "process_clock_cpu_s_per_photo": process_s,
    }
    return figures


def preprocessing(spark, jvm: psutil.Process, folder: Path, images: int, warmups: int) -> dict:
    """bench/image_pipeline.py's workload: mmlspark against opencv-python in two processes."""
    (folder / "jpegs").mkdir()
    paths = image_pipeline.make_jpegs(folder / "jpegs", images)
    run = functools.partial(image_pipeline.run_mmlspark, spark, folder / "jpegs", images)
    # As bench/image_pipeline.py reads them: partitions of at most 1 MiB of files.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 20))
    try:
        figures = {"mmlspark": profiled(jvm, run, images, warmups)}
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    others = {p.pid for p in psutil.Process().children()}  # the JVM, say: not a worker
    with multiprocessing.get_context("fork").Pool(2) as pool:
        workers = [p for p in psutil.Process().children() if p.pid not in others]
        figures["opencv_python"] = timed(
            workers, lambda: image_pipeline.run_opencv(paths, pool), images
        )
    return figures


def run(argv: list[str] | None = None) -> dict:
    """Runs the profile with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=96, help="12 MP photos")
    parser.add_argument("--jpegs", type=int, default=1000, help="640x480 JPEGs")
    parser.add_argument(
        "--warmups", type=int, default=1, help="untimed runs of mmlspark before the timed one"
    )
    parser.add_argument("--quick", action="store_true", help="8 photos, 40 JPEGs")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "where_time_goes.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.jpegs = 8, 40

    import mmlspark

    # The defaults, as in bench/camera_trap.py's "mmlspark": on a CPU the inference service is off
    # and the task threads run the model themselves (no service row below).
    spark = mmlspark.session(
        "local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    jvm = next((p for p in [jvm, *jvm.children(recursive=True)] if "java" in p.name()), jvm)
    with tempfile.TemporaryDirectory() as tmp:
        figures = {
            "images": args.images,
            "jpegs": args.jpegs,
            "camera_trap": camera_trap(spark, jvm, Path(tmp), args.images, args.warmups),
            "preprocessing": preprocessing(spark, jvm, Path(tmp), args.jpegs, args.warmups),
        }
    spark.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(figures, args))
    save_figures(args.out, figures)
    return figures


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


def table(figures: dict, args) -> str:
    lines = [
        "# Where the CPU goes",
        "",
        f"`python bench/where_time_goes.py --images {args.images} --jpegs {args.jpegs}"
        f" --warmups {args.warmups}"
        f"{' --quick' if args.quick else ''}` on {psutil.cpu_count()} cores,"
        f" {time.strftime('%Y-%m-%d')}: one timed run of each contender after warm-up runs. CPU is"
        " that of the JVM (mmlspark: driver and executor in one on local[2]), of this process"
        " (raw Python) or of the two worker processes (opencv-python).",
    ]
    workloads = [
        ("camera_trap", f"{args.images} photos of 4000x3000, decoded at 1/8 -> ResNet-50"),
        ("preprocessing", f"{args.jpegs} JPEGs of 640x480 -> 224x224 tensors (no model)"),
    ]
    for key, title in workloads:
        lines += [
            "",
            f"## {title}",
            "",
            "| contender | photos/s | CPU s per photo | cores busy (of 2) |",
            "|---|---|---|---|",
        ]
        for name, f in figures[key].items():
            lines.append(
                f"| {name} | {f['photos_per_s']:.1f} | {f['cpu_s_per_photo']:.4f}"
                f" | {f['busy_cores']:.2f} |"
            )
        lines += ["", "| CPU s per photo of | seconds |", "|---|---|"]
        for name, f in figures[key].items():
            parts = f.get("thread_cpu_s_per_photo") or f.get("phase_cpu_s_per_photo") or {}
            for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
                lines.append(f"| {name}: {part} | {seconds:.4f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
