"""The GPU proof's measurements, run by scripts/gpu_proof.sh inside the kit (scripts/gpu_kit.py):
ONNXModel with deviceType=cuda on local[N] against raw ONNX Runtime CUDA (Java: bench/RawOrt.java
in the kit's JVM; Python: onnxruntime-gpu) and the Python backend, on the same tensors; outputs
against ONNX Runtime on the CPU; GPU memory across repeated jobs; 12 MP photos decoded and scored.
Every comparison is measured by bench/protocol.py (the same warm-ups and rounds for each
contender, the order reversed every round). Writes the results table (--out, default
bench/results/gpu.md) and its figures as JSON beside it after every section, so that a run cut
short still leaves what it measured.

With --device cpu (the dry run) the same steps run with the CPU provider on tiny sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import models  # noqa: E402
import protocol  # noqa: E402

KIT = Path(os.environ.get("MMLSPARK_GPUKIT", "/tmp/mmlspark-gpukit/kit"))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
#: model: (builder, image size, images) of the full run and of the dry run.
FULL = {"resnet50": (models.resnet50, 224, 512), "tiny": (models.tiny_cnn, 32, 8192)}
DRY = {"tiny": (models.tiny_cnn, 32, 256)}


class Results:
    """The figures so far, written as a table and JSON after every section."""

    def __init__(self, out: Path, copy_to: Path | None, args: argparse.Namespace) -> None:
        self.out, self.copy_to, self.args = out, copy_to, args
        self.figures: dict = {"dry_run": args.device == "cpu", "sections": {}, "notes": []}
        self.start = time.monotonic()

    def left(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.start)

    def section(self, name: str, figures: dict) -> None:
        figures["seconds"] = round(time.monotonic() - self.start, 1)
        self.figures["sections"][name] = figures
        self.write()

    def write(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(markdown(self.figures, self.args))
        self.out.with_suffix(".json").write_text(json.dumps(self.figures, indent=1) + "\n")
        if self.copy_to:
            self.copy_to.mkdir(parents=True, exist_ok=True)
            for path in (self.out, self.out.with_suffix(".json")):
                shutil.copy(path, self.copy_to / path.name)


def command_output(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(spark, device: str) -> dict:
    import onnxruntime as ort
    import pyspark

    jvm = spark.sparkContext._jvm
    system = jvm.java.lang.System
    figures = {
        "card": command_output(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        )
        or "none (no nvidia-smi)",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "java": f"{system.getProperty('java.vm.name')} {system.getProperty('java.version')}",
        "spark": pyspark.__version__,
        "onnxruntime_python": f"{ort.__version__} ({', '.join(ort.get_available_providers())})",
        "onnxruntime_java_providers": ", ".join(
            str(p) for p in jvm.ai.onnxruntime.OrtEnvironment.getAvailableProviders()
        ),
        "onnxruntime_java_native": str(system.getProperty("onnxruntime.native.path")),
        "cuda_libraries": os.environ.get("MMLSPARK_GPUKIT_CUDA_LIBS", "none"),
        "device": device,
    }
    try:
        from importlib.metadata import version

        figures["nvidia_wheels"] = ", ".join(
            f"{n} {version(n)}" for n in ("nvidia-cublas", "nvidia-cudnn-cu13", "torch")
        )
    except Exception:  # noqa: BLE001 - not on the CPU machine
        figures["nvidia_wheels"] = "none"
    return figures


def session(cores: int, memory: str):
    from pyspark.sql import SparkSession

    jars = [KIT / "jars" / name for name in ("mmlspark.jar", "onnxruntime.jar", "opencv.jar")]
    options = f"-Donnxruntime.native.path={KIT / 'ort-java'}"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("gpu-proof")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def noop(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


#: ONNXModel's variants that --variants NAMES measures beside its defaults: (Spark settings, param
#: setter name and value) each; what the GPU's rate depends on besides the model.
SERVICE_ON = {"spark.mmlspark.onnx.inferenceService": "true"}
VARIANTS: dict[str, tuple[dict[str, str], tuple[str, str] | None]] = {
    "service on": (SERVICE_ON, None),
    "service on + padBatches": ({**SERVICE_ON, "spark.mmlspark.onnx.padBatches": "true"}, None),
    "service on + cuDNN HEURISTIC": (SERVICE_ON, ("setCudnnConvAlgoSearch", "HEURISTIC")),
    "service off": ({"spark.mmlspark.onnx.inferenceService": "false"}, None),
}


def with_conf(spark, conf: dict[str, str], run: Callable[[], object]) -> Callable[[], object]:
    """`run` with the Spark settings `conf` in force while it plans and runs its job."""

    def go() -> object:
        before = {k: spark.conf.get(k, None) for k in conf}
        for k, v in conf.items():
            spark.conf.set(k, v)
        try:
            return run()
        finally:
            for k, v in before.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)

    return go


def onnx_variants(
    spark, args, stage, make: Callable[[], object], job: Callable[[object], None]
) -> dict:
    """ONNXModel's contenders: `stage` with its defaults, and with --variants each of VARIANTS;
    `make` makes another stage like it, `job` runs one on the section's data."""
    found: dict[str, Callable[[], object]] = {"ONNXModel": lambda: job(stage)}
    for name in filter(None, args.variants.split(",")):
        conf, setter = VARIANTS[name]
        variant = make()
        if setter:
            getattr(variant, setter[0])(setter[1])
        found[f"ONNXModel, {name}"] = with_conf(spark, conf, lambda v=variant: job(v))
    return found


def service_batches(spark, contenders: dict[str, Callable[[], object]]) -> dict:
    """For each ONNXModel contender, one more run: the inference service's batches and the most
    rows one of them held (0 and 0 where the run did not use the service)."""
    try:
        service = spark.sparkContext._jvm.mmlspark.onnx.InferenceService
        service.batchesRun()
    except Exception as e:  # noqa: BLE001 - a figure to explain the rates, not one of them
        return {"unavailable": f"{type(e).__name__}: {str(e)[:200]}"}
    found = {}
    for name, run in contenders.items():
        if not name.startswith("ONNXModel") or "Python" in name:
            continue
        before = service.batchesRun()
        service.resetLargestBatch()
        run()
        found[name] = {
            "batches": int(service.batchesRun() - before),
            "largest": int(service.largestBatch()),
        }
    return found


class RawOrtJava(protocol.Answering):
    """bench/RawOrt.java (compiled into the kit) in the kit's JVM, answering one timed run per
    request (`protocol.Timed`), with the CUDA or the CPU provider."""

    def __init__(
        self,
        model: Path,
        tensors: Path,
        shape: tuple[int, ...],
        batch: int,
        threads: int,
        device: str,
    ) -> None:
        classpath = f"{KIT / 'jars' / 'onnxruntime.jar'}:{KIT / 'jars' / 'classes'}"
        n, c, h, w = shape
        super().__init__(
            [
                str(KIT / "jre" / "bin" / "java"),
                "-Xmx8g",
                f"-Donnxruntime.native.path={KIT / 'ort-java'}",
                "-cp",
                classpath,
                "RawOrt",
                str(model),
                str(tensors),
                str(n),
                str(c),
                str(h),
                str(w),
                str(batch),
                str(threads),
                device,
            ]
        )


def ort_session(model: Path, device: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    providers: list = ["CPUExecutionProvider"]
    if device == "cuda":
        cuda = {
            "device_id": 0,
            "cudnn_conv_algo_search": "EXHAUSTIVE",
            "arena_extend_strategy": "kSameAsRequested",
        }
        providers = [("CUDAExecutionProvider", cuda), "CPUExecutionProvider"]
    session = ort.InferenceSession(str(model), options, providers=providers)
    if device == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"onnxruntime ran {session.get_providers()}, not CUDA")
    return session


def run_all(session, tensors: np.ndarray, batch: int) -> np.ndarray:
    name = session.get_inputs()[0].name
    outs = [
        session.run(None, {name: tensors[i : i + batch]})[0] for i in range(0, len(tensors), batch)
    ]
    return np.concatenate(outs)


def compare(found: np.ndarray, reference: np.ndarray, tolerance: float) -> dict:
    """How far `found` logits [images, classes] are from the CPU's: the largest absolute
    difference, that over the largest reference logit, the share of equal top classes, whether
    within `tolerance`; and two sums of `found` that a check can recompute (of the absolute
    values, and weighted by numpy's default_rng(0) standard normal draws)."""
    difference = float(np.abs(found - reference).max())
    relative = difference / float(np.abs(reference).max())
    top = float((found.argmax(1) == reference.argmax(1)).mean())
    weights = np.random.default_rng(0).standard_normal(found.shape)
    return {
        "max_abs": difference,
        "relative": relative,
        "top1_equal": top,
        "within_tolerance": bool(relative <= tolerance and top >= 0.95),
        "abs_sum": float(np.abs(found.astype(np.float64)).sum()),
        "weighted_sum": float((weights * found.astype(np.float64)).sum()),
    }


def inference(spark, name: str, args, work: Path) -> dict:
    """One model: the four contenders on the same tensors, and their outputs against the CPU."""
    import pandas as pd

    from mmlspark.onnx import ONNXModel

    build, size, n = (DRY if args.device == "cpu" else FULL)[name]
    model_bytes = build()
    model = work / f"{name}.onnx"
    model.write_bytes(model_bytes)
    tensors = np.random.default_rng(1).standard_normal((n, 3, size, size), dtype=np.float32)
    tensor_file = work / f"{name}.f32"
    tensors.astype("<f4").tofile(tensor_file)
    frame = pd.DataFrame({"id": np.arange(n), "tensor": list(tensors.reshape(n, -1))})
    df = spark.createDataFrame(frame, "id long, tensor array<float>").repartition(args.cores)
    df = df.cache()
    df.count()

    def stage(backend: str):
        onnx = ONNXModel(
            inputCol="tensor", outputCol="logits", miniBatchSize=args.batch, deviceType=args.device
        )
        return onnx.setBackend(backend).setModelPayload(model_bytes)

    jvm_stage, python_stage = stage("jvm"), stage("python")
    raw_python = ort_session(model, args.device, args.cores)
    raw_java = RawOrtJava(
        model, tensor_file, (n, 3, size, size), args.batch, args.cores, args.device
    )
    try:
        contenders: dict[str, Callable[[], object]] = {
            **onnx_variants(
                spark, args, jvm_stage, lambda: stage("jvm"), lambda s: noop(s.transform(df))
            ),
            "ONNXModel, Python backend": lambda: noop(python_stage.transform(df)),
            "raw ORT Java": raw_java,
            "raw ORT Python": lambda: run_all(raw_python, tensors, args.batch),
        }
        rounds = protocol.measure(contenders, warmups=args.warmups, rounds=args.rounds)
    finally:
        raw_java.close()
    figures: dict = {
        "images": n,
        "batch": args.batch,
        "model_mb": round(len(model_bytes) / 2**20, 1),
        "rates": {k: r.rate(n).as_dict() for k, r in rounds.items()},
    }
    pairs = {
        "ONNXModel / raw ORT Java": ("ONNXModel", "raw ORT Java"),
        "ONNXModel / raw ORT Python": ("ONNXModel", "raw ORT Python"),
        "Python backend / raw ORT Python": ("ONNXModel, Python backend", "raw ORT Python"),
        "Python backend / ONNXModel": ("ONNXModel, Python backend", "ONNXModel"),
    }
    pairs.update({f"{k} / raw ORT Java": (k, "raw ORT Java") for k in rounds if ", " in k
                  and k.startswith("ONNXModel") and "Python" not in k})  # fmt: skip
    figures["ratios"] = {
        k: protocol.ratio(rounds[a], rounds[b]).as_dict() for k, (a, b) in pairs.items()
    }
    figures["service"] = service_batches(spark, contenders)

    reference = run_all(ort_session(model, "cpu", os.cpu_count() or 1), tensors, args.batch)
    tolerance = 1e-2 if args.device == "cuda" else 1e-5  # CUDA convolutions may use TF32

    def logits(onnx) -> np.ndarray:
        rows = onnx.transform(df).select("id", "logits").collect()
        return np.stack(
            [np.asarray(r.logits, np.float32) for r in sorted(rows, key=lambda r: r.id)]
        )

    figures["tolerance"] = tolerance
    figures["outputs"] = {
        "ONNXModel": compare(logits(jvm_stage), reference, tolerance),
        "ONNXModel, Python backend": compare(logits(python_stage), reference, tolerance),
        "raw ORT Python": compare(run_all(raw_python, tensors, args.batch), reference, tolerance),
    }
    figures["tensors"] = {"seed": 1, "shape": [n, 3, size, size], "normal": "standard"}
    df.unpersist()
    return figures


class MemorySampler:
    """GPU memory in use (nvidia-smi, MiB, every 200 ms); where there is no nvidia-smi (the dry
    run), the resident memory of the Spark JVM instead."""

    def __init__(self, jvm_pid: int) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self.source = "nvidia-smi memory.used" if shutil.which("nvidia-smi") else "JVM RSS"
        self.jvm_pid = jvm_pid
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self.source == "JVM RSS":
            while not self._stop.wait(0.2):
                for line in Path(f"/proc/{self.jvm_pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.samples.append(int(line.split()[1]) / 1024)
            return
        process = subprocess.Popen(
            [
                "nvidia-smi",
                "--query-gpu=memory.used",
                "--format=csv,noheader,nounits",
                "-i",
                "0",
                "-lms",
                "200",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for line in process.stdout:  # type: ignore[union-attr]
            if self._stop.is_set():
                break
            if line.strip().isdigit():
                self.samples.append(float(line))
        process.kill()

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def memory(spark, args, work: Path) -> dict:
    """`args.jobs` ONNXModel jobs in a row on local[N] (N task threads): the memory after each."""
    import pandas as pd

    from mmlspark.onnx import ONNXModel

    name = "resnet50" if args.device == "cuda" else "tiny"
    build, size, n = (DRY if args.device == "cpu" else FULL)[name]
    tensors = np.random.default_rng(2).standard_normal((n, 3, size, size), dtype=np.float32)
    frame = pd.DataFrame({"id": np.arange(n), "tensor": list(tensors.reshape(n, -1))})
    df = (
        spark.createDataFrame(frame, "id long, tensor array<float>").repartition(args.cores).cache()
    )
    df.count()
    onnx = ONNXModel(
        inputCol="tensor", outputCol="logits", miniBatchSize=args.batch, deviceType=args.device
    ).setModelPayload(build())
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    after: list[float] = []
    peaks: list[float] = []
    with MemorySampler(pid) as sampler:
        for _ in range(args.jobs):
            first = len(sampler.samples)
            noop(onnx.transform(df))
            time.sleep(0.5)  # a sample or two after the job
            window = sampler.samples[first:] or sampler.samples[-1:] or [0.0]
            peaks.append(max(window))
            after.append(window[-1])
    df.unpersist()
    settle = after[1:] or after
    return {
        "model": name,
        "jobs": args.jobs,
        "task_threads": args.cores,
        "source": sampler.source,
        "after_each_mib": after,
        "peak_each_mib": peaks,
        "growth_mib": settle[-1] - settle[0],
        "max_mib": max(peaks),
    }


def make_photos(folder: Path, count: int, height: int, width: int) -> None:
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    distinct = []
    for _ in range(min(count, 8)):
        small = rng.integers(0, 256, (height // 16, width // 16, 3), dtype=np.uint8)
        image = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
        image = cv2.add(image, rng.integers(0, 12, image.shape, dtype=np.uint8))
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        distinct.append(data.tobytes())
    for i in range(count):
        (folder / f"photo{i:04d}.jpg").write_bytes(distinct[i % len(distinct)])


def photos(spark, args, work: Path) -> dict:
    """12 MP photos (dry run: small ones) read, decoded, transformed, and scored on the device,
    against the same without the model: where the two rates meet, decoding bounds the rate."""
    from mmlspark.image import read_images
    from mmlspark.onnx import ONNXModel
    from mmlspark.opencv import ImageTransformer

    full = args.device == "cuda"
    height, width, count = (3000, 4000, args.photos) if full else (300, 400, 8)
    name = "resnet50" if full else "tiny"
    build, size, _ = FULL[name]
    folder = work / "photos"
    made = time.monotonic()
    make_photos(folder, count, height, width)
    made = time.monotonic() - made
    transform = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .resize(size=size * 8 // 7, keepAspectRatio=True)
        .centerCrop(size, size)
        .normalize(mean=MEAN, std=STD, colorScaleFactor=1 / 255)
    )
    payload = build()

    def make():
        return ONNXModel(
            feedDict=json.dumps({"image": "tensor"}),
            fetchDict=json.dumps({"logits": "logits"}),
            argMaxDict=json.dumps({"logits": "top"}),
            miniBatchSize=args.batch,
            deviceType=args.device,
        ).setModelPayload(payload)

    onnx = make()

    def tensors():
        return transform.transform(read_images(spark, str(folder)))

    def scored_job(stage) -> None:
        noop(stage.transform(tensors()).select("path", "top"))

    variants = onnx_variants(spark, args, onnx, make, scored_job)
    contenders: dict[str, Callable[[], object]] = {
        "decode and transform": lambda: noop(tensors().select("path", "tensor")),
        **{
            k.replace("ONNXModel", f"decode, transform, {name} on {args.device}"): v
            for k, v in variants.items()
        },
    }
    rounds = protocol.measure(contenders, warmups=args.warmups, rounds=args.rounds)
    scored = onnx.transform(tensors()).select("path", "top").collect()
    rates = {k: r.rate(count).as_dict() for k, r in rounds.items()}
    names = list(rounds)
    return {
        "partitions": tensors().rdd.getNumPartitions(),
        "service": service_batches(spark, variants),
        "photos": count,
        "size": f"{width}x{height}",
        "made_s": round(made, 1),
        "rows_scored": len(scored),
        "rates": rates,
        "per_core": {k: v["median"] / args.cores for k, v in rates.items()},
        "scored_over_decode": protocol.ratio(rounds[names[1]], rounds[names[0]]).as_dict(),
        "variants_over_decode": {
            k: protocol.ratio(rounds[k], rounds[names[0]]).as_dict() for k in names[2:]
        },
    }


def probe(device: str) -> dict:
    """No Spark: the tiny CNN on `device` with onnxruntime in Python (its logits against the CPU
    provider's) and with ONNX Runtime Java (bench/RawOrt.java in the kit's JVM), to find a
    provider that does not load before the run."""
    import onnxruntime as ort

    build, size, _ = FULL["tiny"]
    n = 256
    figures: dict = {"device": device, "python_providers": ort.get_available_providers()}
    with tempfile.TemporaryDirectory(prefix="gpu-probe-") as tmp:
        model = Path(tmp) / "tiny.onnx"
        model.write_bytes(build())
        tensors = np.random.default_rng(4).standard_normal((n, 3, size, size), dtype=np.float32)
        tensor_file = Path(tmp) / "tiny.f32"
        tensors.astype("<f4").tofile(tensor_file)
        started = time.monotonic()
        found = run_all(ort_session(model, device, 1), tensors, 64)
        figures["python_seconds"] = round(time.monotonic() - started, 2)
        reference = run_all(ort_session(model, "cpu", 1), tensors, 64)
        figures["python_outputs"] = compare(found, reference, 1e-2)
        started = time.monotonic()
        java = RawOrtJava(model, tensor_file, (n, 3, size, size), 64, 1, device)
        try:
            figures["java_first_run_seconds"] = round(java().seconds, 3)
        finally:
            java.close()
        figures["java_seconds"] = round(time.monotonic() - started, 2)
    return figures


def spread(d: dict, digits: int = 1) -> str:
    return protocol.Spread(**d).text(digits)


def service_line(service: dict) -> str:
    """The inference service's batches per run of each ONNXModel contender, as a sentence."""
    if not service:
        return ""
    if "unavailable" in service:
        return f"The inference service's batch counts: unavailable ({service['unavailable']})."
    return (
        "The inference service, one more run each: "
        + "; ".join(
            f"{k}: {v['batches']} batches, largest {v['largest']} rows" for k, v in service.items()
        )
        + "."
    )


def markdown(figures: dict, args) -> str:
    dry = figures["dry_run"]
    title = "# GPU proof" + (" — DRY RUN on the CPU (no GPU; not a result)" if dry else "")
    env = figures.get("environment", {})
    lines = [
        title,
        "",
        f"`scripts/gpu_proof.sh{' --dry-run' if dry else ' --run'}`, {time.strftime('%Y-%m-%d')},"
        f" deviceType={args.device}, local[{args.cores}], batch {args.batch}; every contender of"
        f" a table: {args.warmups} untimed warm-up rounds and {args.rounds} timed rounds, in an"
        " order reversed every round (bench/protocol.py); rates as the median round's (slowest -"
        " fastest), ratios as the median of the per-round ratios (range).",
        "",
    ]
    if env:
        lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in env.items()] + [""]
    sections = figures["sections"]
    for name in ("resnet50", "tiny"):
        s = sections.get(f"inference {name}")
        if not s:
            continue
        lines += [
            f"## {name}: {s['images']} random tensors, {s['model_mb']} MB model",
            "",
            "| contender | images/s |",
            "|---|---|",
        ]
        lines += [f"| {k} | {spread(v)} |" for k, v in s["rates"].items()]
        lines += ["", "| ratio | value |", "|---|---|"]
        lines += [f"| {k} | {spread(v, 2)} |" for k, v in s["ratios"].items()]
        lines += [
            "",
            f"Outputs against ONNX Runtime on the CPU (tolerance: largest difference within"
            f" {s['tolerance']:g} of the largest logit, top classes 95% equal):",
            "",
            "| contender | max abs difference | relative | top-1 equal | within |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {k} | {v['max_abs']:.3g} | {v['relative']:.3g} | {v['top1_equal']:.3f} |"
            f" {'yes' if v['within_tolerance'] else 'NO'} |"
            for k, v in s["outputs"].items()
        ]
        lines += ["", service_line(s.get("service", {}))]
        lines.append("")
    m = sections.get("memory")
    if m:
        lines += [
            f"## Memory: {m['jobs']} ONNXModel jobs ({m['model']}), {m['task_threads']} task"
            f" threads, {m['source']}",
            "",
            f"After job 1: {m['after_each_mib'][0]:.0f} MiB; after job 2:"
            f" {m['after_each_mib'][min(1, len(m['after_each_mib']) - 1)]:.0f} MiB; after the"
            f" last: {m['after_each_mib'][-1]:.0f} MiB; growth from job 2 to the last:"
            f" {m['growth_mib']:+.0f} MiB; highest sample {m['max_mib']:.0f} MiB.",
            "",
            "After each job (MiB): " + " ".join(f"{v:.0f}" for v in m["after_each_mib"]),
            "",
        ]
    p = sections.get("photos")
    if p:
        lines += [
            f"## Photos: {p['photos']} JPEGs of {p['size']} (made in {p['made_s']} s)",
            "",
            "| pipeline | photos/s | per core |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {spread(v)} | {p['per_core'][k]:.2f} |" for k, v in p["rates"].items()]
        lines += [
            "",
            f"Scored over decode-only: {spread(p['scored_over_decode'], 2)} (near 1:"
            " decoding bounds the rate)"
            + "".join(
                f"; {k}: {spread(v, 2)}" for k, v in p.get("variants_over_decode", {}).items()
            )
            + f". {p.get('partitions', '?')} partitions.",
            "",
            service_line(p.get("service", {})),
            "",
        ]
    for note in figures["notes"]:
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--cores", type=int, default=min(os.cpu_count() or 1, 16))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=30, help="ONNXModel jobs of the memory check")
    parser.add_argument("--photos", type=int, default=128, help="12 MP photos")
    parser.add_argument("--memory", default="24g", help="the Spark JVM's heap")
    parser.add_argument("--budget-s", type=float, default=400, help="skip what would not fit")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu.md")
    parser.add_argument("--copy-to", type=Path, default=None, help="also write the results here")
    parser.add_argument("--probe", action="store_true", help="only try the provider (no Spark)")
    parser.add_argument(
        "--sections", default="resnet50,tiny,memory,photos", help="what to measure, in order"
    )
    parser.add_argument(
        "--variants", default="", help="ONNXModel's variants beside it: VARIANTS' names, by commas"
    )
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.device), indent=1), flush=True)
        return
    if args.device == "cpu":
        args.warmups, args.rounds, args.jobs = 1, 2, 3
    results = Results(args.out, args.copy_to, args)
    spark = session(args.cores, args.memory)
    results.figures["environment"] = environment(spark, args.device)
    results.write()
    plan: list[tuple[str, Callable[[Path], dict]]] = [
        (f"inference {m}", lambda w, m=m: inference(spark, m, args, w))  # type: ignore[misc]
        for m in (DRY if args.device == "cpu" else FULL)
    ]
    plan += [
        ("memory", lambda w: memory(spark, args, w)),
        ("photos", lambda w: photos(spark, args, w)),
    ]
    wanted = args.sections.split(",")
    plan = sorted(
        [(n, step) for n, step in plan if n.split()[-1] in wanted],
        key=lambda p: wanted.index(p[0].split()[-1]),
    )
    failed = False
    with tempfile.TemporaryDirectory(prefix="gpu-proof-") as tmp:
        for name, step in plan:
            if results.left() < 30:
                results.figures["notes"].append(
                    f"{name}: skipped, {results.left():.0f} s of the budget left"
                )
                continue
            started = time.monotonic()
            try:
                results.section(name, step(Path(tmp)))
            except Exception as e:  # noqa: BLE001 - record it, and go on with the next section
                failed = True
                results.figures["notes"].append(
                    f"{name}: FAILED: {type(e).__name__}: {str(e)[:2000]}"
                )
            print(f"[gpu-proof] {name}: {time.monotonic() - started:.1f} s", flush=True)
            results.write()
    spark.stop()
    print(results.out.read_text())
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
