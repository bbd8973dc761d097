"""SynapseML as a benchmark peer: the incumbent, installed the way its users install it, in a
virtualenv of its own (never committed) so its Spark 3.5 line cannot touch ours.

    python bench/synapseml_peer.py setup           # creates bench/.peers/synapseml (once)
    bench/.peers/synapseml/bin/python bench/synapseml_peer.py run MODEL TENSORS N SIZE BATCH REPEATS

`setup` installs pyspark 3.5 from the Python registry; SynapseML's jars (and their dependencies:
ONNX Runtime 1.8 GPU build, OpenCV 3.2, ...) come from Maven Central through
`spark.jars.packages` on the first run and are cached by Ivy. Maven Central carries the whole
SynapseML module set for 1.1.0 only (1.1.1 to 1.1.3 publish synapseml-core there, not the
deep-learning and opencv modules), so 1.1.0 is the version measured.

`run` scores the same float32 tensors as the other peers with SynapseML's ONNXModel on
local[2] (tensors cached as the nested arrays its ONNXModel reads), best of REPEATS after a
warm-up, and prints one JSON line: images/s and the peak resident memory of its JVM.
"""

from __future__ import annotations

import json
import os
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


def run(model: str, tensors: str, n: int, size: int, batch: int, repeats: int) -> dict:
    import numpy as np
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
    from synapse.ml.onnx import ONNXModel

    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    data = np.fromfile(tensors, dtype="<f4").reshape(n, 3, size, size)
    rows = [(i, data[i].tolist()) for i in range(n)]
    df = spark.createDataFrame(rows, "id long, tensor array<array<array<float>>>")
    df = df.repartition(2).cache()
    df.count()
    onnx = (
        ONNXModel()
        .setModelLocation(model)
        .setFeedDict({"image": "tensor"})
        .setFetchDict({"logits": "logits"})
        .setMiniBatchSize(batch)
        .setDeviceType("CPU")
    )

    def once() -> None:
        onnx.transform(df).write.format("noop").mode("overwrite").save()

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
    spark.stop()
    return {"images_per_s": n / min(times), "jvm_peak_rss_mb": peak[0] / 2**20}


def measure(model: Path, tensors: Path, n: int, size: int, batch: int, repeats: int) -> dict:
    """Runs `run` in the SynapseML virtualenv (set up on first use) and returns its figures."""
    interpreter = setup()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    result = subprocess.run(
        [str(interpreter), __file__, "run", str(model), str(tensors), str(n), str(size)]
        + [str(batch), str(repeats)],
        capture_output=True,
        text=True,
        env={**env, "PYSPARK_PYTHON": str(interpreter)},
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"SynapseML run failed:\n{result.stderr[-4000:]}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        print(setup())
    else:
        model, tensors, n, size, batch, repeats = sys.argv[2:8]
        print(json.dumps(run(model, tensors, int(n), int(size), int(batch), int(repeats))))
