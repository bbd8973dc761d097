"""Benchmark: camera-trap-size photos. 4000x3000 JPEGs made in code (smooth texture plus grain,
so they compress like photos, about 2 MB each) -> decode at 1/8 (500x375, the smallest JPEG scale
that covers 224x224) -> resize 224x224 -> RGB, ImageNet-normalized CHW -> ResNet-50 architecture
(random weights) -> top class, side by side in one run on two cores, with the same decode for
every contender:
  - mmlspark: Spark's binaryFile source -> ImageTransformer decoding the bytes in the same pass at
    1/8 (reducedDecode) -> ONNXModel, on local[2], with the defaults a user gets (on a CPU the
    inference service and pinned outputs are off, as in every mmlspark pipeline here), beside it
    with the service on,
  - mmlspark, read_images: read_images -> ImageTransformer -> ONNXModel as written for small
    photos; the transformer decodes the files itself at 1/8 and the full image is never decoded,
  - mmlspark, read_images with the full decode: the same with reducedDecode=False, for
    comparison,
  - mmlspark, Python backend: the first pipeline with setBackend("python") (opencv-python and
    onnxruntime in Arrow UDFs, as on compute that cannot load the jar),
  - mmlspark, Python backend, read_images: the read_images pipeline on the Python backend, as the
    README writes it for jar-less compute (the transformer reads the files itself there too),
  - predict_batch_udf: binaryFile, a pandas UDF decoding with opencv-python's
    IMREAD_REDUCED_COLOR_8, then predict_batch_udf + onnxruntime (one intra-op thread per task),
  - raw Python: opencv-python (IMREAD_REDUCED_COLOR_8) in two threads, onnxruntime with two
    intra-op threads, in this process,
  - the camera-trap CLI: `classify` with a model trained (by `train`, on the same photos in two
    folders) on the same ResNet-50 cut at its pooled features, over a survey of --survey distinct
    photos, against raw Python over the same survey, each `classify` a process of its own into a
    new results folder, credited with its own summary line's seconds (its process's wall time,
    the JVM's start included, reported beside it).
Peak RSS of the JVM is sampled during one more (untimed) run of each mmlspark pipeline and
during the CLI's warm-up runs. Every contender but the CLI computes the same top class (checked).
Both comparisons follow one protocol (bench/protocol.py): --warmups untimed and --repeats timed
rounds, the order reversed every round, medians with their range. Writes
bench/results/camera_trap.md and .json. Not a test.
The quick (smoke) run has a tiny CNN in place of ResNet-50 (bench/models.py's quick_classifier).

Usage: python bench/camera_trap.py [--images N] [--survey N] [--repeats R] [--warmups W] [--quick]
                                   [--only-cli]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import onnx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import models  # noqa: E402
import protocol  # noqa: E402
from end_to_end import agree, noop, raw_python, tops_of, udf_pipeline  # noqa: E402
from image_pipeline import MEAN, STD, preprocess_reduced  # noqa: E402
from onnx_inference import PeakRss, rates_of, ratios_of, report_rounds, service_on  # noqa: E402

BATCH = 64
HEIGHT, WIDTH = 3000, 4000
SIZE = 224


def make_photos(folder: Path, count: int, distinct: int = 8) -> list[Path]:
    """`count` 12 MP JPEGs in `folder`/deer and `folder`/fox, `distinct` different pictures."""
    rng = np.random.default_rng(0)
    pictures = []
    for _ in range(min(distinct, count)):
        small = rng.integers(0, 256, (HEIGHT // 40, WIDTH // 40, 3), dtype=np.uint8)
        img = cv2.resize(small, (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
        grain = rng.integers(-12, 13, img.shape, dtype=np.int16)
        img = np.clip(img.astype(np.int16) + grain, 0, 255).astype(np.uint8)
        pictures.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
    paths = []
    for i in range(count):
        path = folder / ("deer" if i % 2 == 0 else "fox") / f"IMG_{i:05d}.JPG"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pictures[i % len(pictures)])
        paths.append(path)
    return paths


#: The shared decode: 1/8 scale, SIZE x SIZE, RGB, ImageNet-normalized CHW float32 (defined in
#: image_pipeline.py, the module the predict_batch_udf contender ships to the Python workers).
preprocess = functools.partial(preprocess_reduced, size=SIZE)


def jvms_under(root: int):
    """Selects, for PeakRss, the Java processes started by process `root` (or that are it)."""

    def select(pid: int, cmdline: str) -> bool:
        if "java" not in cmdline.split(" ", 1)[0]:
            return False
        try:
            return pid == root or root in (p.pid for p in psutil.Process(pid).parents())
        except psutil.Error:
            return False

    return select


def onnx_stage(model: bytes):
    from mmlspark.onnx import ONNXModel

    return ONNXModel(
        feedDict={"image": "tensor"},
        fetchDict={"logits": "logits"},
        argMaxDict={"logits": "top"},
        miniBatchSize=BATCH,
    ).setModelPayload(model)


def transformer(input_col: str):
    from mmlspark.opencv import ImageTransformer

    return (
        ImageTransformer(inputCol=input_col, outputCol="tensor", toTensor=True)
        .resize(SIZE, SIZE)
        .normalize(mean=MEAN.tolist(), std=STD.tolist(), colorScaleFactor=1 / 255)
    )


def mmlspark_pipeline(
    spark, folder: Path, model: bytes, binary: bool, backend: str = "jvm", reduced: bool = True
):
    """The function of the scored rows (path, top, transformError) of one of the mmlspark
    pipelines: binaryFile -> ImageTransformer, or read_images -> ImageTransformer (with or
    without its reduced decode), then ONNXModel."""
    from mmlspark.image import read_images

    onnx_model = onnx_stage(model).setBackend(backend).setModelPayload(model)

    def scored():
        if binary:
            files = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
            images, stage = files.load(str(folder)), transformer("content").setBackend(backend)
        else:
            images = read_images(spark, str(folder), backend=backend)
            stage = transformer("image").setBackend(backend).setReducedDecode(reduced)
        return onnx_model.transform(stage.transform(images)).select("path", "top", "transformError")

    return scored


def checked_tops(scored) -> dict[str, int]:
    rows = scored().collect()
    assert all(r.transformError is None for r in rows), [r.transformError for r in rows][:3]
    return tops_of(scored().select("path", "top"))


def feature_node(model: bytes) -> str:
    """The pooled-features tensor of the ResNet-50 graph (the Flatten before the classifier)."""
    graph = onnx.load_from_string(model).graph
    return next(n.output[0] for n in graph.node if n.op_type == "Flatten")


def make_survey(folder: Path, count: int) -> list[Path]:
    """A survey of `count` distinct 12 MP JPEGs in `folder`/deer and `folder`/fox, each its own
    picture (its own coarse texture under a shared grain), so that no photo is a copy of another
    as on a real card; encoded in two threads."""
    rng = np.random.default_rng(1)
    grain = rng.integers(-12, 13, (HEIGHT, WIDTH, 3), dtype=np.int16)
    shape = (HEIGHT // 40, WIDTH // 40, 3)
    bases = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(count)]

    def write(i: int) -> Path:
        img = cv2.resize(bases[i], (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
        img = np.clip(img.astype(np.int16) + grain, 0, 255).astype(np.uint8)
        path = folder / ("deer" if i % 2 == 0 else "fox") / f"SURVEY_{i:06d}.JPG"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
        return path

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(write, range(count)))


CLI = [sys.executable, "-m", "mmlspark.apps.camera_trap", "--master", "local[2]"]


def train_cli(folder: Path, model_path: Path, work: Path, node: str) -> Path:
    """The CLI's classifier, trained (by `train`) on the photos in `folder` over the ResNet-50
    cut at `node`."""
    train = [*CLI, "train", "--images", str(folder), "--featurizer", str(model_path)]
    train += ["--feature-node", node, "--image-size", str(SIZE), "--model-out", str(work / "m")]
    subprocess.run(train, check=True, cwd=ROOT, capture_output=True, text=True)
    return work / "m"


class CliRun:
    """The camera-trap CLI as a contender: each call is one `classify` process over the survey
    into a new results folder, credited with the seconds of its own summary line (listing,
    scoring, commits and final outputs; `walls` keeps each process's wall time, its JVM's start
    included). The JVM's peak RSS is sampled during the untimed warm-up rounds only (`peak`), so
    that the sampling costs no timed round anything."""

    def __init__(self, survey: Path, count: int, model: Path, work: Path, warmups: int) -> None:
        self.survey, self.count, self.model, self.work = survey, count, model, work
        self.warmups, self.calls, self.peak = warmups, 0, 0
        self.walls: list[float] = []

    def __call__(self) -> protocol.Timed:
        out = self.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        classify = [*CLI, "classify", "--images", str(self.survey), "--model", str(self.model)]
        start = time.perf_counter()
        process = subprocess.Popen(
            [*classify, "--out", str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if self.calls < self.warmups:
            with PeakRss(jvms_under(process.pid)) as rss:
                output, _ = process.communicate()
            self.peak = max(self.peak, rss.peak)
        else:
            output, _ = process.communicate()
            self.walls.append(time.perf_counter() - start)
        self.calls += 1
        if process.returncode != 0:
            raise RuntimeError(f"classify failed:\n{output[-3000:]}")
        return protocol.Timed(self.count / cli_rate(output, self.count))


def cli_rate(output: str, count: int) -> float:
    """The photos/s of classify's summary line in `output`, checked to be of all `count` photos."""
    match = re.search(r"\[classify\].*this run (\d+) photos in .*\(([\d.]+) photos/s\)", output)
    if match is None:
        raise RuntimeError(f"no summary line in:\n{output[-3000:]}")
    scored = int(match.group(1))
    if scored != count:
        raise RuntimeError(f"classify scored {scored} photos, not the survey's {count}")
    return float(match.group(2))


def run(argv: list[str] | None = None) -> dict:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--images",
        type=int,
        default=192,
        help="photos per timed round of each contender: enough that a round is a steady state,"
        " with the per-job costs and the JIT's warm-up spread as on a survey",
    )
    parser.add_argument(
        "--survey",
        type=int,
        default=960,
        help="distinct photos the CLI and raw Python classify, alternated: a run long enough that"
        " the CLI's start, listing and final outputs weigh as they do in a survey; 0 leaves the"
        " CLI out",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds before them")
    parser.add_argument(
        "--quick", action="store_true", help="4 photos, 1 round, no warm-up, a tiny CNN, no CLI"
    )
    parser.add_argument(
        "--only-cli",
        action="store_true",
        help="only the CLI against raw Python over the survey (camera_trap_cli.md and .json"
        " beside --out)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "camera_trap.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.repeats, args.warmups = 4, 1, 0
    with_cli = not args.quick and args.survey > 0
    if args.only_cli:
        return only_cli(args)

    import mmlspark

    spark = mmlspark.session("local[2]", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
    model_name, model = models.classifier(args.quick)
    agreement: dict[str, float] = {}
    peak_rss_mb: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        paths = make_photos(folder, args.images)
        photo_mb = sum(p.stat().st_size for p in paths) / len(paths) / 1e6
        model_path = Path(tmp) / "classifier.onnx"
        model_path.write_bytes(model)
        pipelines = {
            "mmlspark": mmlspark_pipeline(spark, folder, model, binary=True),
            "mmlspark_python_backend": mmlspark_pipeline(
                spark, folder, model, binary=True, backend="python"
            ),
            "mmlspark_read_images": mmlspark_pipeline(spark, folder, model, binary=False),
            "mmlspark_python_read_images": mmlspark_pipeline(
                spark, folder, model, binary=False, backend="python"
            ),
            "mmlspark_read_images_full_decode": mmlspark_pipeline(
                spark, folder, model, binary=False, reduced=False
            ),
        }
        udf = udf_pipeline(spark, folder, model_path, preprocess)
        raw_run, raw_tops = raw_python(paths, model_path, preprocess)

        def service_on_run() -> None:
            with service_on(spark):
                noop(pipelines["mmlspark"]())

        contenders = {name: (lambda p=p: noop(p())) for name, p in pipelines.items()}
        contenders["mmlspark_service_on"] = service_on_run
        contenders["predict_batch_udf"] = lambda: noop(udf())
        contenders["raw_python"] = raw_run
        rounds = protocol.measure(contenders, warmups=args.warmups, rounds=args.repeats)
        jvms = jvms_under(spark.sparkContext._gateway.proc.pid)
        for name in [*pipelines, "mmlspark_service_on"]:
            if not name.startswith("mmlspark_python"):
                with PeakRss(jvms) as rss:
                    contenders[name]()
                peak_rss_mb[name] = rss.peak / 1e6
        expected = checked_tops(pipelines["mmlspark"])
        for name in (
            "mmlspark_python_backend",
            "mmlspark_read_images",
            "mmlspark_python_read_images",
        ):
            agreement[name] = agree(checked_tops(pipelines[name]), expected)
        with service_on(spark):
            agreement["mmlspark_service_on"] = agree(checked_tops(pipelines["mmlspark"]), expected)
        agreement["predict_batch_udf"] = agree(tops_of(udf()), expected)
        agreement["raw_python"] = agree(raw_tops, expected)
        measured = rates_of(rounds, args.images)
        spark.stop()
        if with_cli:
            cli = cli_comparison(args, folder, model, model_path, Path(tmp))
            write_cli(args, model_name, cli)
            peak_rss_mb["camera_trap_cli"] = cli.pop("peak_rss_mb")
    figures = {
        "images": args.images,
        "model": model_name,
        "mmlspark_top_classes": expected,
        "cli_survey_photos": args.survey if with_cli else None,
        "photo": f"{WIDTH}x{HEIGHT} JPEG, {photo_mb:.1f} MB on average",
        "top_class_agreement_with_mmlspark": agreement,
        **measured,
        "peak_jvm_rss_mb": peak_rss_mb,
        **ratios_of(rounds, RATIOS),
        "cli": cli if with_cli else None,
        "cli_ratio_vs_raw_python": cli["ratio"]["median"] if with_cli else None,
    }
    if with_cli:
        figures["ratio_spreads"]["cli_ratio_vs_raw_python"] = cli["ratio"]
    cli_text = (
        f" The CLI against raw Python over a survey of {args.survey} distinct photos, rounds"
        f" alternated as above: CLI {cli['cli_photos_per_s']['median']:.1f} photos/s by its"
        f" summary line, raw Python {cli['raw_python_photos_per_s']['median']:.1f}, CLI / raw"
        f" Python {protocol.Spread(**cli['ratio']).text()}; the CLI's process, its JVM's start"
        f" included: {cli['cli_process_photos_per_s']['median']:.1f} photos/s."
        if with_cli
        else ""
    )
    report_rounds(
        args.out,
        "Camera-trap benchmark",
        f"python bench/camera_trap.py --images {args.images} --survey {args.survey}"
        f" --repeats {args.repeats} --warmups {args.warmups}{' --quick' if args.quick else ''}",
        f"{WIDTH}x{HEIGHT} JPEGs ({photo_mb:.1f} MB) -> decode at 1/8 -> resize {SIZE}x{SIZE} ->"
        f" normalize -> {model_name} (random weights) -> top class; the CLI classifies"
        " with a logistic regression on the pooled features. Peak JVM RSS (MB):"
        f" {', '.join(f'{k} {v:.0f}' for k, v in peak_rss_mb.items())}.{cli_text}",
        "photos",
        rounds,
        args.images,
        "mmlspark",
        "mmlspark >= 1.0x raw Python and >= 2x predict_batch_udf; the CLI >= 0.8x raw Python;"
        " the Python backend >= 1.2x predict_batch_udf and >= 0.8x the JVM backend",
        figures,
    )
    return figures


def cli_comparison(args, folder: Path, model: bytes, model_path: Path, work: Path) -> dict:
    """The camera-trap CLI's `classify` and raw Python over one survey of `args.survey` distinct
    photos, by the protocol (the same warm-ups and rounds, order alternated): each one's photos/s
    (median, range), CLI / raw Python round by round, the CLI process's photos/s with its JVM's
    start, and the JVM's peak RSS (MB)."""
    paths = make_survey(work / "survey", args.survey)
    trained = train_cli(folder, model_path, work, feature_node(model))
    cli = CliRun(work / "survey", args.survey, trained, work, args.warmups)
    raw_run, _ = raw_python(paths, model_path, preprocess)
    rounds = protocol.measure(
        {"camera_trap_cli": cli, "raw_python": raw_run}, warmups=args.warmups, rounds=args.repeats
    )
    return {
        "survey_photos": args.survey,
        "cli_photos_per_s": rounds["camera_trap_cli"].rate(args.survey).as_dict(),
        "raw_python_photos_per_s": rounds["raw_python"].rate(args.survey).as_dict(),
        "ratio": protocol.ratio(rounds["camera_trap_cli"], rounds["raw_python"]).as_dict(),
        "cli_process_photos_per_s": protocol.Rounds(tuple(cli.walls)).rate(args.survey).as_dict(),
        "peak_rss_mb": cli.peak / 1e6,
    }


def only_cli(args) -> dict:
    """`--only-cli`: the CLI comparison alone, written as `write_cli` writes it."""
    model_name, model = models.classifier(False)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "photos"
        make_photos(folder, args.images)
        model_path = Path(tmp) / "classifier.onnx"
        model_path.write_bytes(model)
        cli = cli_comparison(args, folder, model, model_path, Path(tmp))
    return write_cli(args, model_name, cli)


def write_cli(args, model_name: str, cli: dict) -> dict:
    """The CLI comparison's table and JSON, camera_trap_cli.md and .json beside --out (by
    `--only-cli` or by the whole benchmark: bench/summary.py's CLI row reads them)."""
    figures = {"model": model_name, "cli": cli, "cli_ratio_vs_raw_python": cli["ratio"]["median"]}
    spread = protocol.Spread
    lines = [
        "# Camera-trap CLI benchmark",
        "",
        f"`python bench/camera_trap.py{' --only-cli' if args.only_cli else ''} --survey"
        f" {args.survey} --images {args.images} --repeats {args.repeats} --warmups"
        f" {args.warmups}` on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}: `classify` (a"
        f" logistic regression trained by `train` on {args.images} photos over {model_name}'s"
        f" pooled features) and raw Python over {args.survey} distinct {WIDTH}x{HEIGHT} JPEGs,"
        " the same warm-ups and rounds, order reversed every round; photos/s of the median round"
        " (slowest - fastest).",
        "",
        "| contender | photos/s |",
        "|---|---|",
        f"| camera-trap CLI, by its summary line | {spread(**cli['cli_photos_per_s']).text(1)} |",
        f"| camera-trap CLI, its process (JVM start included) |"
        f" {spread(**cli['cli_process_photos_per_s']).text(1)} |",
        f"| raw Python | {spread(**cli['raw_python_photos_per_s']).text(1)} |",
        "",
        f"CLI / raw Python, round by round: {spread(**cli['ratio']).text()} (target 0.8). Peak"
        f" JVM RSS of the CLI: {cli['peak_rss_mb']:.0f} MB.",
        "",
    ]
    out = Path(args.out).with_name("camera_trap_cli.md")
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


#: Figure name: (contender, contender) whose per-round rate ratio it is.
RATIOS = {
    "ratio_vs_raw_python": ("mmlspark", "raw_python"),
    "ratio_vs_predict_batch_udf": ("mmlspark", "predict_batch_udf"),
    "python_backend_vs_predict_batch_udf": ("mmlspark_python_backend", "predict_batch_udf"),
    "python_backend_vs_jvm_backend": ("mmlspark_python_backend", "mmlspark"),
    "service_on_vs_off": ("mmlspark_service_on", "mmlspark"),
    "read_images_vs_raw_python": ("mmlspark_read_images", "raw_python"),
    "python_read_images_vs_predict_batch_udf": ("mmlspark_python_read_images", "predict_batch_udf"),
    "python_read_images_vs_jvm_read_images": (
        "mmlspark_python_read_images",
        "mmlspark_read_images",
    ),
    "raw_python_vs_predict_batch_udf": ("raw_python", "predict_batch_udf"),
}


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


if __name__ == "__main__":
    main()
