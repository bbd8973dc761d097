"""SynapseML as a benchmark peer: the incumbent, installed the way its users install it, in a
virtualenv of its own (never committed) so its Spark 3.5 line cannot touch ours.

    python bench/synapseml_peer.py setup           # creates bench/.peers/synapseml (once)
    # then, with bench/.peers/synapseml/bin/python as the interpreter:
    synapseml_peer.py run MODEL TENSORS N SIZE BATCH REPEATS
    synapseml_peer.py run-images MODEL FOLDER N BATCH REPEATS

`setup` installs pyspark 3.5 from the Python registry; SynapseML's jars (and their dependencies:
ONNX Runtime 1.8 GPU build, OpenCV 3.2, ...) come from Maven Central through
`spark.jars.packages` on the first run and are cached by Ivy. Maven Central carries the whole
SynapseML module set for 1.1.0 only (1.1.1 to 1.1.3 publish synapseml-core there, not the
deep-learning and opencv modules), so 1.1.0 is the version measured.

`run` scores the same float32 tensors as the other peers with SynapseML's ONNXModel on
local[2] (tensors cached as the nested arrays its ONNXModel reads); `run-images` runs the
end-to-end pipeline on image files with SynapseML's own stages. Both take the best of REPEATS
after a warm-up and print one JSON line: images/s and the peak resident memory of its JVM.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "bench" / ".peers" / "synapseml"
SYNAPSEML = "com.microsoft.azure:synapseml-deep-learning_2.12:1.1.0"
PYSPARK = "pyspark==3.5.7"
REQUIREMENTS = [PYSPARK, "numpy==1.26.4", "pandas==2.2.3", "pyarrow==20.0.0"]


def add_option(parser) -> None:
    """The benchmarks' `--no-synapseml` flag (`args.synapseml`, on by default)."""
    parser.add_argument(
        "--no-synapseml",
        dest="synapseml",
        action="store_false",
        help="leave out SynapseML (its first run sets up its own virtualenv and jars)",
    )


def python() -> Path:
    return VENV / "bin" / "python"


def setup() -> Path:
    """The SynapseML virtualenv's Python, created on first use."""
    marker = VENV / ".installed"
    wanted = "\n".join(REQUIREMENTS)
    if not marker.exists() or marker.read_text() != wanted:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python()), "-m", "pip", "install", "-q", *REQUIREMENTS], check=True)
        marker.write_text(wanted)
    return python()


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _session():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars.packages", SYNAPSEML)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed(spark, once, repeats: int) -> tuple[float, float]:
    """The median seconds of `repeats` runs of `once` after a warm-up (the statistic of
    bench/protocol.py; this runs in SynapseML's own virtualenv, alone), and the JVM's peak RSS in
    MB."""
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss(jvm_pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    once()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    stop.set()
    sampler.join()
    return statistics.median(times), peak[0] / 2**20


def _onnx_model(model: str, batch: int, **dicts: dict):
    from synapse.ml.onnx import ONNXModel

    onnx = (
        ONNXModel()
        .setModelLocation(model)
        .setFeedDict({"image": "tensor"})
        .setFetchDict({"logits": "logits"})
        .setMiniBatchSize(batch)
        .setDeviceType("CPU")
    )
    if "argMaxDict" in dicts:
        onnx.setArgMaxDict(dicts["argMaxDict"])
    return onnx


def run(model: str, tensors: str, n: int, size: int, batch: int, repeats: int) -> dict:
    """SynapseML's ONNXModel on cached tensors."""
    import numpy as np

    spark = _session()
    data = np.fromfile(tensors, dtype="<f4").reshape(n, 3, size, size)
    rows = [(i, data[i].tolist()) for i in range(n)]
    df = spark.createDataFrame(rows, "id long, tensor array<array<array<float>>>")
    df = df.repartition(2).cache()
    df.count()
    onnx = _onnx_model(model, batch)
    seconds, rss = _timed(
        spark, lambda: onnx.transform(df).write.format("noop").mode("overwrite").save(), repeats
    )
    spark.stop()
    return {"images_per_s": n / seconds, "jvm_peak_rss_mb": rss}


def run_images(model: str, folder: str, n: int, batch: int, repeats: int) -> dict:
    """End to end with SynapseML's own stages: Spark's image source, its ImageTransformer
    (resize the shorter side to 256, center crop 224, ImageNet normalization, tensor) and its
    ONNXModel with argMax. Returns images/s, peak RSS and each file's top class."""
    spark = _session()  # puts SynapseML's jars, which carry its Python code, on sys.path
    from synapse.ml.opencv import ImageTransformer

    transform = (
        ImageTransformer(inputCol="image", outputCol="tensor")
        .resize(256, True)
        .centerCrop(224, 224)
        .normalize(
            mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225], color_scale_factor=1 / 255
        )
        .setToTensor(True)
    )
    onnx = _onnx_model(model, batch, argMaxDict={"logits": "top"})

    def scored():
        images = spark.read.format("image").load(folder)
        return onnx.transform(transform.transform(images)).select("image.origin", "top")

    seconds, rss = _timed(
        spark, lambda: scored().write.format("noop").mode("overwrite").save(), repeats
    )
    tops = {Path(r.origin).name: int(r.top) for r in scored().collect()}
    spark.stop()
    return {"images_per_s": n / seconds, "jvm_peak_rss_mb": rss, "tops": tops}


def _in_venv(*args: object) -> dict:
    """Runs this file with `args` in the SynapseML virtualenv (set up on first use) and returns
    the JSON it prints last."""
    interpreter = setup()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    result = subprocess.run(
        [str(interpreter), __file__, *map(str, args)],
        capture_output=True,
        text=True,
        env={**env, "PYSPARK_PYTHON": str(interpreter)},
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"SynapseML run failed:\n{result.stderr[-4000:]}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def measure(model: Path, tensors: Path, n: int, size: int, batch: int, repeats: int) -> dict:
    """SynapseML's ONNXModel on the tensors in `tensors` (see `run`)."""
    return _in_venv("run", model, tensors, n, size, batch, repeats)


def measure_images(model: Path, folder: Path, n: int, batch: int, repeats: int) -> dict:
    """SynapseML end to end on the image files in `folder` (see `run_images`)."""
    return _in_venv("run-images", model, folder, n, batch, repeats)


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "setup":
        print(setup())
    elif command == "run":
        model, tensors, n, size, batch, repeats = arguments
        print(json.dumps(run(model, tensors, int(n), int(size), int(batch), int(repeats))))
    else:
        model, folder, n, batch, repeats = arguments
        print(json.dumps(run_images(model, folder, int(n), int(batch), int(repeats))))
