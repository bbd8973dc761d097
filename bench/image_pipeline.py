"""Benchmark: decode + resize + centerCrop + normalize -> tensor, mmlspark vs opencv-python.

All contenders do the same work on the same synthetic 640x480 JPEGs with two cores: mmlspark
through ``read_images`` + ``ImageTransformer`` on ``local[2]``, on the JVM and on its Python backend
(opencv-python in Arrow UDFs), and opencv-python in two worker processes. One protocol for all
(``bench/protocol.py``): ``--warmups`` untimed and ``--repeats`` timed rounds, the order reversed
every round, medians with their range. Reports images/s, peak resident memory and, for
each mmlspark backend, a digest of the tensors it made (``tensor_digest``), which a check can
recompute with opencv-python from the same JPEGs (``make_jpegs`` is deterministic). Writes
``bench/results/images.md``. Not a test: numbers vary with the machine and its load.

Usage: python bench/image_pipeline.py [--images N] [--repeats R] [--warmups W] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def make_jpegs(folder: Path, count: int) -> list[Path]:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:480, 0:640]
    paths = []
    for i in range(count):
        base = np.stack([(x + 3 * i) % 256, (y + 5 * i) % 256, (x + y + i) % 256], -1)
        img = np.clip(base + rng.integers(-25, 26, base.shape), 0, 255).astype(np.uint8)
        path = folder / f"img{i:05d}.jpg"
        path.write_bytes(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
        paths.append(path)
    return paths


def opencv_one(path: str) -> int:
    return preprocess(np.fromfile(path, np.uint8)).size


def preprocess(encoded: np.ndarray) -> np.ndarray:
    """Decode, shorter side to 256, center crop 224, RGB, ImageNet-normalized CHW float32."""
    img = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    scale = 256 / min(h, w)
    nh, nw = (256, math.floor(w * scale + 0.5)) if h <= w else (math.floor(h * scale + 0.5), 256)
    resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    y0, x0 = (nh - 224) // 2, (nw - 224) // 2
    rgb = resized[y0 : y0 + 224, x0 : x0 + 224, ::-1].astype(np.float32)
    return ((rgb * np.float32(1 / 255) - MEAN) / STD).transpose(2, 0, 1).ravel()


def preprocess_reduced(encoded: np.ndarray, size: int = 224) -> np.ndarray:
    """bench/camera_trap.py's decode of 12 MP photos: at 1/8 scale, then `size`x`size`, RGB,
    ImageNet-normalized CHW float32. Here, not there, as this is the module end_to_end.run_udf
    ships to Spark's Python workers, which cannot import the benchmarks themselves."""
    img = cv2.imdecode(encoded, cv2.IMREAD_REDUCED_COLOR_8)
    resized = cv2.resize(img, (size, size), interpolation=cv2.INTER_LINEAR)
    rgb = resized[:, :, ::-1].astype(np.float32)
    return ((rgb * np.float32(1 / 255) - MEAN) / STD).transpose(2, 0, 1).ravel()


def run_opencv(paths: list[Path], pool: multiprocessing.pool.Pool) -> None:
    sizes = pool.map(opencv_one, [str(p) for p in paths], chunksize=16)
    assert all(s == 3 * 224 * 224 for s in sizes)


def tensors(spark, folder: Path, backend: str = "jvm"):
    """The images of `folder` with the tensors mmlspark makes of them (column `tensor`)."""
    from mmlspark.image import read_images
    from mmlspark.opencv import ImageTransformer

    tf = (
        ImageTransformer(outputCol="tensor", toTensor=True)
        .resize(size=256, keepAspectRatio=True)
        .centerCrop(224, 224)
        .normalize(mean=MEAN.tolist(), std=STD.tolist(), colorScaleFactor=1 / 255)
        .setBackend(backend)
    )
    photos = read_images(spark, str(folder), backend=backend)
    return tf.transform(photos)


def tensor_digest(spark, folder: Path, backend: str = "jvm") -> dict:
    """Means over all images of each channel of mmlspark's tensors, and of their absolute values
    (summed in Spark: no tensor leaves the executors)."""
    plane = 224 * 224
    sums = [
        f"sum(aggregate(slice(tensor, {c * plane + 1}, {plane}), 0D, (a, x) -> a + x))"
        for c in range(3)
    ]
    sums.append("sum(aggregate(tensor, 0D, (a, x) -> a + abs(x)))")
    row = tensors(spark, folder, backend).selectExpr("count(*)", *sums).first()
    count = row[0]
    return {
        "images": count,
        "channel_means": [row[1 + c] / (count * plane) for c in range(3)],
        "abs_mean": row[4] / (count * 3 * plane),
    }


def run_mmlspark(spark, folder: Path, count: int, backend: str = "jvm") -> None:
    out = tensors(spark, folder, backend).selectExpr("size(tensor) AS n")
    sizes = out.groupBy("n").count().collect()
    assert [(r["n"], r["count"]) for r in sizes] == [(3 * 224 * 224, count)], sizes


def peak_rss_mib(pid: int) -> float:
    """The peak resident memory of live process `pid` in MiB (Linux's VmHWM); 0 where unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    peaks = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(peaks[0]) / 1024 if peaks else 0.0


def run(argv: list[str] | None = None) -> dict:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes and
    prints its table, writes its JSON, and returns its figures."""
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds before them")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 40 images, 1 round, no warm-up"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "images.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.repeats, args.warmups = 40, 1, 0

    import mmlspark

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = make_jpegs(folder, args.images)
        spark = mmlspark.session(
            "local[2]",
            {
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.files.maxPartitionBytes": str(1 << 20),
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        # Imported here, on the driver: end_to_end.py ships this module alone to the executors.
        import protocol
        from onnx_inference import PeakRss

        jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        jvm_peak = PeakRss(lambda pid, _: pid == jvm_pid)  # sampled over all the runs
        others = {p.pid for p in psutil.Process().children()}  # the JVM, say
        with jvm_peak, multiprocessing.get_context("fork").Pool(2) as pool:
            workers = [p.pid for p in psutil.Process().children() if p.pid not in others]
            rounds = protocol.measure(
                {
                    "mmlspark": lambda: run_mmlspark(spark, folder, args.images),
                    "mmlspark_python_backend": lambda: run_mmlspark(
                        spark, folder, args.images, "python"
                    ),
                    "opencv_python": lambda: run_opencv(paths, pool),
                },
                warmups=args.warmups,
                rounds=args.repeats,
            )
            # Of the pool's workers alone (this process's other children, in a run of several
            # benchmarks, are not opencv-python's).
            worker_rss = max(peak_rss_mib(pid) for pid in workers)
        jvm_rss = jvm_peak.peak / 2**20
        digests = {
            "mmlspark": tensor_digest(spark, folder),
            "mmlspark_python_backend": tensor_digest(spark, folder, "python"),
        }
        spark.stop()
    if not worker_rss:  # no /proc: the largest child this process has waited for
        worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rates = {name: r.rate(args.images) for name, r in rounds.items()}
    ratios = {
        "ratio": ("mmlspark", "opencv_python"),
        "python_backend_ratio": ("mmlspark_python_backend", "opencv_python"),
        "python_backend_vs_jvm_backend": ("mmlspark_python_backend", "mmlspark"),
    }
    spreads = {key: protocol.ratio(rounds[a], rounds[b]) for key, (a, b) in ratios.items()}
    result = {
        "images": args.images,
        "repeats": args.repeats,
        "warmups": args.warmups,
        "mmlspark_images_per_s": round(rates["mmlspark"].median, 1),
        "opencv_python_images_per_s": round(rates["opencv_python"].median, 1),
        "mmlspark_python_backend_images_per_s": round(rates["mmlspark_python_backend"].median, 1),
        **{key: round(spread.median, 3) for key, spread in spreads.items()},
        "spreads": {name: rate.as_dict() for name, rate in rates.items()},
        "ratio_spreads": {key: spread.as_dict() for key, spread in spreads.items()},
        "mmlspark_jvm_peak_rss_mib": round(jvm_rss, 1),
        "opencv_worker_peak_rss_mib": round(worker_rss, 1),
        "tensor_digests": digests,
    }
    machine = (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"OpenCV {cv2.__version__}, mmlspark {mmlspark.__version__}, Spark {mmlspark.spark_version}"
    )
    table = "\n".join(
        [
            "# Image preprocessing: decode + resize(256) + centerCrop(224) + normalize -> tensor",
            "",
            f"{args.images} synthetic 640x480 JPEGs, two cores each; every contender the same"
            f" {args.warmups} warm-up and {args.repeats} timed rounds, in an order reversed every"
            " round: images/s of the median round (slowest - fastest), ratios as the median of"
            " the per-round ratios (range).",
            f"Machine: {machine}.",
            "",
            "| contender | images/s | ratio to opencv-python | peak resident memory |",
            "|---|---:|---:|---:|",
            f"| mmlspark (read_images + ImageTransformer, local[2]) | {rates['mmlspark'].text(1)}"
            f" | {spreads['ratio'].text(2)} | {jvm_rss:.0f} MiB (Spark JVM) |",
            "| mmlspark, Python backend (the same stages, local[2]) |"
            f" {rates['mmlspark_python_backend'].text(1)} |"
            f" {spreads['python_backend_ratio'].text(2)} | not sampled (Python workers) |",
            f"| opencv-python, 2 worker processes | {rates['opencv_python'].text(1)} | 1.00 | "
            f"{worker_rss:.0f} MiB (largest worker) |",
            "",
        ]
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table)
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(table)
    return result


def main() -> int:
    print(json.dumps(run()))  # the last line of output: the figures
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
