"""Benchmark: ONNX inference on two cores, ONNXModel against its peers, side by side in one run.

For each model (ResNet-50 architecture and a tiny CNN, built in code with random weights), the
same float32 image tensors go through
  - ONNXModel on local[2] (tensors in a cached DataFrame column, as ImageTransformer writes them),
    with the defaults a user gets (on a CPU the inference service and pinned outputs are off),
    beside it with the service on and with the outputs pinned,
  - raw ONNX Runtime Java in one JVM with the same threads and batch size (bench/RawOrt.java:
    the practical limit),
  - raw onnxruntime in Python, one session with two intra-op threads, same batches,
  - pyspark.ml.functions.predict_batch_udf + onnxruntime in Python on local[2],
  - ONNXModel on the Python backend (setBackend("python"): onnxruntime in Arrow UDFs, as on
    compute that cannot load the jar) on local[2], the same params; its top classes are checked
    against the JVM ONNXModel's.
All of them are measured by one protocol (bench/protocol.py): --warmups untimed rounds, then
--repeats timed rounds, in an order reversed every round; each rate is the median round's with the
range of the rounds, each ratio the median of the per-round ratios with their range. Reports
images/s, ratios, ONNX Runtime sessions created and peak resident memory (one more untimed run
each), and digests of ONNXModel's logits with its output buffers pinned and unpinned (the tensors
come from --seed, so that a check can recompute them with onnxruntime); writes
bench/results/onnx.md. Not a test: numbers vary with the machine and its load.

Usage: python bench/onnx_inference.py [--models resnet50,tiny] [--repeats R] [--warmups W] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import models  # noqa: E402
import protocol  # noqa: E402
import synapseml_peer  # noqa: E402

# model: (builder, image size, images)
MODELS = {"resnet50": (models.resnet50, 224, 256), "tiny": (models.tiny_cnn, 32, 8192)}


class PeakRss:
    """Samples the summed resident memory of the processes `select(pid, command line)` picks,
    keeping the peak."""

    def __init__(self, select) -> None:
        self.select, self.peak, self._stop = select, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        total = 0
        for process in psutil.process_iter(["cmdline", "memory_info"]):
            memory = process.info["memory_info"]
            cmdline = " ".join(process.info["cmdline"] or [])
            if memory is not None and self.select(process.pid, cmdline):
                total += memory.rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.1)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def save_figures(table: str, figures) -> None:
    """Writes `figures` as JSON next to the results table (what bench/summary.py reads)."""
    Path(table).with_suffix(".json").write_text(json.dumps(figures, indent=1) + "\n")


def report(
    out: str,
    title: str,
    command: str,
    setup: str,
    column: str,
    rates: dict,
    ratio,
    target: str,
    figures: dict,
) -> None:
    """Writes a results table of images/s per contender with `ratio(its rate)`, and `figures`
    as JSON beside it."""
    lines = [
        f"# {title}",
        "",
        f"`{command}` on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}. {setup}",
        "",
        f"| {column} |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {rate:.1f} | {ratio(rate):.2f} |" for name, rate in rates.items()]
    lines += ["", f"Target: {target}.", ""]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("\n".join(lines))
    save_figures(out, figures)


def report_rounds(
    out: str,
    title: str,
    command: str,
    setup: str,
    noun: str,
    rounds: dict[str, protocol.Rounds],
    items: int,
    reference: str,
    target: str,
    figures: dict,
) -> None:
    """Writes the table of a `protocol.measure` comparison: each contender's `noun`/s (median
    round, slowest - fastest) and `reference`'s rate over its own, round by round (median,
    range); and `figures` as JSON beside it."""
    lines = [
        f"# {title}",
        "",
        f"`{command}` on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}. {setup} Every"
        " contender: the same warm-ups and timed rounds, in an order reversed every round;"
        f" {noun}/s of the median round (slowest - fastest), ratios as the median of the"
        " per-round ratios (range).",
        "",
        f"| contender | {noun}/s | {reference} / contender |",
        "|---|---|---|",
    ]
    for name, r in rounds.items():
        ratio = protocol.ratio(rounds[reference], r).text(2)
        lines.append(f"| {name} | {r.rate(items).text(1)} | {ratio} |")
    lines += ["", f"Target: {target}.", ""]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("\n".join(lines))
    save_figures(out, figures)


def rates_of(rounds: dict[str, protocol.Rounds], items: int) -> dict:
    """Figures of a `protocol.measure` comparison: "images_per_s" (each contender's median
    rate), "spreads" (its median, slowest and fastest round) and "rounds"."""
    return {
        "images_per_s": {name: r.rate(items).median for name, r in rounds.items()},
        "spreads": {name: r.rate(items).as_dict() for name, r in rounds.items()},
        "rounds": len(next(iter(rounds.values())).seconds),
    }


def ratios_of(rounds: dict[str, protocol.Rounds], pairs: dict[str, tuple[str, str]]) -> dict:
    """For each figure name of `pairs` (a, b): the median per-round ratio of a's rate over b's,
    and its range under "ratio_spreads"."""
    spreads = {key: protocol.ratio(rounds[a], rounds[b]) for key, (a, b) in pairs.items()}
    figures: dict = {key: spread.median for key, spread in spreads.items()}
    figures["ratio_spreads"] = {key: spread.as_dict() for key, spread in spreads.items()}
    return figures


@contextlib.contextmanager
def setting(spark, key: str, value: str):
    """Spark setting `key` at `value` inside the block, as it was before after it."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def service_off(spark):
    """ONNXModel with the executor's inference service set off, for a stage that runs its model
    through the service on a CPU by default (ObjectDetector): a contender beside the defaults."""
    return setting(spark, "spark.mmlspark.onnx.inferenceService", "false")


def service_on(spark):
    """ONNXModel with the executor's inference service set on (on a CPU it is off by default, each
    task running its own batches on the shared session): a contender beside the defaults."""
    return setting(spark, "spark.mmlspark.onnx.inferenceService", "true")


class RawOrtJava(protocol.Answering):
    """Raw ONNX Runtime Java (bench/RawOrt.java) in a JVM of its own, loaded once: each call runs
    every batch once there and returns the seconds it measured (`protocol.Timed`), so that it is
    timed in turn with the other contenders."""

    def __init__(self, work: Path, ort_jar: str, model: Path, tensors: Path, n: int, size: int,
                 batch: int) -> None:  # fmt: skip
        classes = work / "classes"
        if not (classes / "RawOrt.class").exists():
            subprocess.run(
                ["javac", "-d", str(classes), "-cp", ort_jar, str(ROOT / "bench" / "RawOrt.java")],
                check=True,
            )
        shape = [str(n), "3", str(size), str(size), str(batch), "2"]
        super().__init__(["java", "-Xmx4g", "-cp", f"{ort_jar}:{classes}", "RawOrt", str(model),
                          str(tensors), *shape])  # fmt: skip


def raw_python(model: Path, tensors: np.ndarray, batch: int):
    """onnxruntime in this Python process: one session, two intra-op threads (the two cores the
    other contenders get), the same batches. Returns the function of one run over all tensors."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run() -> None:
        for start in range(0, len(tensors), batch):
            session.run(None, {name: tensors[start : start + batch]})

    return run


def rss_of(pid: int) -> int:
    """Resident memory of a process in bytes (0 once it is gone)."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def logits_by_id(scored) -> dict[int, np.ndarray]:
    return {r.id: np.asarray(r.logits, np.float32) for r in scored.select("id", "logits").collect()}


def logit_digest(logits: dict[int, np.ndarray]) -> dict:
    """Two sums of the logits [n, classes] of images 0..n-1 (keyed by id): of their absolute
    values, and weighted by standard normal weights [n, classes] from numpy's default_rng(0),
    which logits given to the wrong image or class (a reused buffer, a lost order) move. Small
    enough for the figures, and recomputable by whoever has the model and the tensors."""
    ids = sorted(logits)
    assert ids == list(range(len(ids))), "the images are not ids 0..n-1"
    rows = np.stack([logits[i] for i in ids]).astype(np.float64)
    weights = np.random.default_rng(0).standard_normal(rows.shape)
    return {
        "images": len(ids),
        "abs_sum": float(np.abs(rows).sum()),
        "weighted_sum": float((weights * rows).sum()),
    }


def agreement(logits: dict, expected: dict) -> tuple[float, float]:
    """The share of images given the same top class as in `expected` (the JVM ONNXModel's), and
    the largest absolute logit difference. Random-weight logits can tie to the last bits, and
    batch composition moves those bits, so the share is checked to be near 1, not exactly 1."""
    assert set(logits) == set(expected), "a contender lost or added images"
    share = sum(logits[k].argmax() == expected[k].argmax() for k in expected) / len(expected)
    assert share >= 0.95, f"only {share:.2f} of the top classes agree with ONNXModel's on the JVM"
    return share, max(float(np.abs(logits[k] - expected[k]).max()) for k in expected)


def tensor_frame(spark, tensors: np.ndarray, partitions: int = 2):
    import pandas as pd

    flat = tensors.reshape(len(tensors), -1)
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    frame = pd.DataFrame({"id": np.arange(len(flat)), "tensor": list(flat)})
    df = spark.createDataFrame(frame, "id long, tensor array<float>")
    df = df.repartition(partitions).cache()
    df.count()
    return df


def seeded_tensors(seed: int, n: int, size: int) -> np.ndarray:
    """The benchmark's input: `n` float32 tensors [3, size, size] of standard normal values."""
    return np.random.default_rng(seed).standard_normal((n, 3, size, size), dtype=np.float32)


def run_peers(name: str, args, work: Path, spark) -> dict:
    from mmlspark.onnx import ONNXModel

    build, size, n = MODELS[name]
    if args.quick:
        n = min(n, 256)
    model_bytes = build()
    model_path = work / f"{name}.onnx"
    model_path.write_bytes(model_bytes)
    tensors = seeded_tensors(args.seed, n, size)
    tensor_path = work / f"{name}.f32"
    tensors.astype("<f4").tofile(tensor_path)
    df = tensor_frame(spark, tensors)
    jvm = spark.sparkContext._jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    figures: dict = {
        "model": name,
        "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
        "images": n,
        "tensor_seed": args.seed,
        "batch": args.batch,
        "model_mb": round(len(model_bytes) / 2**20, 1),
    }

    onnx = ONNXModel(inputCol="tensor", outputCol="logits", miniBatchSize=args.batch)
    onnx.setModelPayload(model_bytes)
    python_backend = ONNXModel(inputCol="tensor", outputCol="logits", miniBatchSize=args.batch)
    python_backend = python_backend.setBackend("python").setModelPayload(model_bytes)

    def written(frame) -> None:
        frame.write.format("noop").mode("overwrite").save()

    def onnx_run() -> None:
        written(onnx.transform(df))

    def service_on_run() -> None:
        with service_on(spark):
            onnx_run()

    def pinned_run() -> None:
        # Output buffers reused run after run, against outputs ONNX Runtime allocates each run
        # (the CPU default).
        with setting(spark, "spark.mmlspark.onnx.pinOutputs", "true"):
            onnx_run()

    udf = predict_batch_udf_of(model_path, args.batch, size)
    ort_jar = next(
        j for j in spark.sparkContext.getConf().get("spark.jars").split(",") if "onnxruntime" in j
    ).replace("file://", "")
    python_rss_before = rss_of(os.getpid())
    contenders = {
        "mmlspark": onnx_run,
        "mmlspark, service on": service_on_run,
        "mmlspark, outputs pinned": pinned_run,
        "mmlspark, Python backend": lambda: written(python_backend.transform(df)),
        "predict_batch_udf": lambda: written(df.select(udf("tensor").alias("logits"))),
        "raw ORT Python": raw_python(model_path, tensors, args.batch),
    }
    sessions_before = jvm.mmlspark.onnx.OrtSessions.created()
    raw_java = RawOrtJava(work, ort_jar, model_path, tensor_path, n, size, args.batch)
    try:
        contenders["raw ORT Java"] = raw_java
        rounds = protocol.measure(contenders, warmups=args.warmups, rounds=args.repeats)
        # One per settings: the tasks' own (the defaults, pinned or not) and the inference
        # service's.
        figures["mmlspark_sessions_created"] = (
            jvm.mmlspark.onnx.OrtSessions.created() - sessions_before
        )
        figures["raw_ort_python_rss_mb"] = (rss_of(os.getpid()) - python_rss_before) / 2**20
        # Peak memory: one more run of each on its own, untimed (the sampler takes CPU). The
        # Python workers are shared by predict_batch_udf and the Python backend.
        workers = lambda pid, cmdline: pid == jvm_pid or "pyspark" in cmdline  # noqa: E731
        for key, pick, run in [
            ("mmlspark_jvm_peak_rss_mb", lambda pid, _: pid == jvm_pid, onnx_run),
            ("raw_ort_java_peak_rss_mb", lambda pid, _: pid == raw_java.process.pid, raw_java),
            ("predict_batch_udf_peak_rss_mb", workers, contenders["predict_batch_udf"]),
        ]:
            with PeakRss(pick) as rss:
                run()
            figures[key] = rss.peak / 2**20
    finally:
        raw_java.close()
    figures.update(rates_and_ratios(rounds, n))

    # What each way gives, not only how fast: a pinned buffer handed on before it is copied out
    # shows as logits of the wrong image.
    # Both set explicitly, so that the comparison holds whatever the default is.
    with setting(spark, "spark.mmlspark.onnx.pinOutputs", "true"):
        pinned_logits = logits_by_id(onnx.transform(df))
    figures["mmlspark_pinned_logits"] = logit_digest(pinned_logits)
    with setting(spark, "spark.mmlspark.onnx.pinOutputs", "false"):
        unpinned_logits = logits_by_id(onnx.transform(df))
    figures["mmlspark_unpinned_logits"] = logit_digest(unpinned_logits)
    share, difference = agreement(logits_by_id(python_backend.transform(df)), unpinned_logits)
    figures["python_backend_top_class_agreement"] = share
    figures["python_backend_max_abs_logit_difference"] = difference

    if args.synapseml:
        # SynapseML needs ONNX Runtime 1.17 and Spark 3.5: a process of its own, measured there
        # with the same warm-up and rounds (not in turn with the contenders above).
        old_model = work / f"{name}-opset13.onnx"
        old_model.write_bytes(models.for_old_runtimes(model_bytes))
        peer = synapseml_peer.measure(old_model, tensor_path, n, size, args.batch, args.repeats)
        figures["synapseml_images_per_s"] = peer["images_per_s"]
        figures["synapseml_jvm_peak_rss_mb"] = peer["jvm_peak_rss_mb"]
        figures["ratio_vs_synapseml"] = figures["mmlspark_images_per_s"] / peer["images_per_s"]
    df.unpersist()
    return figures


#: Figure name: (contender, contender) whose per-round rate ratio it is.
RATIOS = {
    "service_on_vs_off": ("mmlspark, service on", "mmlspark"),
    "pinned_vs_unpinned": ("mmlspark, outputs pinned", "mmlspark"),
    "ratio_vs_raw": ("mmlspark", "raw ORT Java"),
    "ratio_vs_raw_python": ("mmlspark", "raw ORT Python"),
    "ratio_vs_predict_batch_udf": ("mmlspark", "predict_batch_udf"),
    "python_backend_vs_jvm_backend": ("mmlspark, Python backend", "mmlspark"),
    "python_backend_vs_raw_ort_python": ("mmlspark, Python backend", "raw ORT Python"),
    "python_backend_vs_predict_batch_udf": ("mmlspark, Python backend", "predict_batch_udf"),
}
#: Figure name of each contender's median rate.
RATE_FIGURES = {
    "mmlspark": "mmlspark_images_per_s",
    "mmlspark, service on": "mmlspark_service_on_images_per_s",
    "mmlspark, outputs pinned": "mmlspark_pinned_images_per_s",
    "mmlspark, Python backend": "mmlspark_python_backend_images_per_s",
    "predict_batch_udf": "predict_batch_udf_images_per_s",
    "raw ORT Python": "raw_ort_python_images_per_s",
    "raw ORT Java": "raw_ort_java_images_per_s",
}


def rates_and_ratios(rounds: dict[str, protocol.Rounds], n: int) -> dict:
    """The figures of one measurement: each contender's median rate (and its range under
    "spreads"), and each ratio of RATIOS as the median of its per-round ratios (range under
    "ratio_spreads")."""
    measured = rates_of(rounds, n)
    figures: dict = {RATE_FIGURES[name]: rate for name, rate in measured["images_per_s"].items()}
    # The defaults' outputs are unpinned (on a CPU).
    figures["mmlspark_unpinned_images_per_s"] = figures["mmlspark_images_per_s"]
    figures.update(ratios_of(rounds, RATIOS))
    figures["rounds"], figures["spreads"] = measured["rounds"], measured["spreads"]
    return figures


def predict_batch_udf_of(model_path: Path, batch: int, size: int):
    """pyspark's predict_batch_udf with onnxruntime, one intra-op thread per task, written as a
    user would."""
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql.types import ArrayType, FloatType

    path = str(model_path)

    def make_predict_fn():
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        input_name = session.get_inputs()[0].name

        def predict(x: np.ndarray) -> np.ndarray:
            return session.run(None, {input_name: x})[0]

        return predict

    return predict_batch_udf(
        make_predict_fn,
        return_type=ArrayType(FloatType()),
        batch_size=batch,
        input_tensor_shapes=[[3, size, size]],
    )


def table(results: list[dict], args) -> str:
    def f(v, spec=".1f"):
        return "n/a" if v is None else format(v, spec)

    def rate(r: dict, contender: str) -> str:
        """A contender's median images/s with the range of its rounds."""
        spread = r["spreads"].get(contender)
        return "n/a" if spread is None else protocol.Spread(**spread).text(1)

    def ratio(r: dict, key: str) -> str:
        spread = r["ratio_spreads"].get(key)
        return "n/a" if spread is None else protocol.Spread(**spread).text(2)

    lines = [
        "# ONNX inference benchmark",
        "",
        f"`python bench/onnx_inference.py --models {args.models} --repeats {args.repeats}"
        f" --warmups {args.warmups}{' --quick' if args.quick else ''}` on {platform.machine()},"
        f" {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}. Random float32 tensors, batch"
        f" {args.batch}, two threads (local[2]: two tasks). ONNXModel runs with the defaults a"
        " user gets: on a CPU the inference service and pinned outputs are off, and each task runs"
        " its own batches with one intra-op thread; with the service on, it runs the batches of"
        " both tasks on two worker threads, one intra-op thread each. Every contender: the same"
        " warm-ups and timed"
        " rounds, in an order reversed every round; images/s as the median round's (slowest -"
        " fastest), ratios as the median of the per-round ratios (range). SynapseML runs in a"
        " process of its own with the same rounds, not in turn with the others.",
        "",
        "| model | images | rounds | ONNXModel img/s | ONNXModel, service on img/s |"
        " ONNXModel, Python backend img/s | raw ORT Java img/s | raw ORT Python img/s |"
        " predict_batch_udf img/s | SynapseML 1.1.0 img/s | ONNXModel / raw Java |"
        " ONNXModel / predict_batch_udf | ONNXModel / SynapseML | Python backend / ONNXModel |"
        " Python backend / raw ORT Python | Python backend / predict_batch_udf |"
        " Python backend's top classes equal to ONNXModel's | sessions created |"
        " peak RSS MB (ONNXModel JVM / raw JVM / udf JVM+Python / SynapseML JVM) |"
        " outputs pinned img/s | pinned / unpinned | service on / off |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['model']} ({r['model_mb']} MB) | {r['images']} | {r['rounds']}"
            f" | {rate(r, 'mmlspark')} | {rate(r, 'mmlspark, service on')}"
            f" | {rate(r, 'mmlspark, Python backend')} | {rate(r, 'raw ORT Java')}"
            f" | {rate(r, 'raw ORT Python')} | {rate(r, 'predict_batch_udf')}"
            f" | {f(r.get('synapseml_images_per_s'))} | {ratio(r, 'ratio_vs_raw')}"
            f" | {ratio(r, 'ratio_vs_predict_batch_udf')} | {f(r.get('ratio_vs_synapseml'), '.2f')}"
            f" | {ratio(r, 'python_backend_vs_jvm_backend')}"
            f" | {ratio(r, 'python_backend_vs_raw_ort_python')}"
            f" | {ratio(r, 'python_backend_vs_predict_batch_udf')}"
            f" | {f(r.get('python_backend_top_class_agreement'), '.2f')}"
            f" | {r['mmlspark_sessions_created']} | {f(r['mmlspark_jvm_peak_rss_mb'], '.0f')} /"
            f" {f(r['raw_ort_java_peak_rss_mb'], '.0f')} /"
            f" {f(r.get('predict_batch_udf_peak_rss_mb'), '.0f')} /"
            f" {f(r.get('synapseml_jvm_peak_rss_mb'), '.0f')}"
            f" | {rate(r, 'mmlspark, outputs pinned')} | {ratio(r, 'pinned_vs_unpinned')}"
            f" | {ratio(r, 'service_on_vs_off')} |"
        )
    lines += [
        "",
        "Targets: ONNXModel >= 0.95 of raw ONNX Runtime on ResNet-50, >= 0.6 on the tiny CNN,"
        " >= 1.5x predict_batch_udf on the tiny CNN. The JVM's peak RSS includes Spark and the"
        " cached tensors.",
        "",
    ]
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> list[dict]:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures, one dict per model."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="resnet50,tiny")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds before them")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1, help="of the random input tensors")
    parser.add_argument(
        "--quick", action="store_true", help="tiny CNN, 256 images, 1 repeat, no warm-up"
    )
    synapseml_peer.add_option(parser)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "onnx.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.repeats, args.warmups, args.synapseml = "tiny", 1, 0, False

    import mmlspark

    spark = mmlspark.session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.driver.memory": "6g",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            results.append(run_peers(name, args, Path(tmp), spark))
            print(json.dumps(results[-1]), file=sys.stderr)
    spark.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table(results, args))
    save_figures(args.out, results)
    return results


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


if __name__ == "__main__":
    main()
