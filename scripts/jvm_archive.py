"""The class archive the test suite's Spark JVMs map (Java's application class-data sharing).

One local Spark JVM, started as the tests start theirs (this checkout's jar, the test JVM
options), runs a small pipeline through the code paths most tests take (images, ONNX, Parquet,
CSV, a window, a join) and, as it exits, writes the classes it loaded to ARCHIVE. Every later JVM
with the same Java and class path maps them instead of loading, parsing and verifying them
again: a Spark driver's start and first job take about half the time (here: a bare session
8.2 -> 4.1 s wall and 10.5 -> 5.9 CPU s; a session with this package's jar and one
ImageTransformer job 13-16 -> 8-9 s wall). Nothing else changes: the same classes, the same
code. A JVM whose Java or class path differs (the other Spark lines' virtualenvs, JDK 21) and a
JVM that finds no archive run as before, silently (the Makefile passes -Xlog:cds=off).

The archive is written to a temporary name and renamed into place once the JVM has exited, so
that no JVM maps a half-written file; when making it fails, the suite runs without it (slower,
not different) and this says why.

Usage: python scripts/jvm_archive.py ARCHIVE   (run by `make test`, `test-python`, `test-fast`)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKLOAD = r"""
import sys, tempfile
import numpy as np, cv2
from onnx import TensorProto, helper
import mmlspark
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer
from pyspark.sql import Window, functions as F

spark = mmlspark.session("local[2]", {"spark.ui.enabled": "false"})
spark.sparkContext.setLogLevel("ERROR")
pictures = [cv2.imencode(ext, np.full((48, 64, 3), i * 40, np.uint8))[1].tobytes()
            for i, ext in enumerate([".jpg", ".png", ".jpg"])]
df = spark.createDataFrame([(f"p{i}", bytearray(b)) for i, b in enumerate(pictures)],
                           "path string, content binary")
tensors = ImageTransformer(inputCol="content", outputCol="t", toTensor=True).resize(8, 8)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3, 8, 8])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx = ONNXModel(feedDict={"x": "t"}, fetchDict={"y": "y"}).setModelPayload(
    model.SerializeToString())
scored = onnx.transform(tensors.transform(df)).select("path", F.size("y").alias("n"))
with tempfile.TemporaryDirectory() as tmp:
    scored.write.parquet(f"{tmp}/p")
    back = spark.read.parquet(f"{tmp}/p")
    ranked = back.withColumn("r", F.row_number().over(Window.partitionBy("n").orderBy("path")))
    ranked.join(df.select("path"), "path").write.option("header", True).csv(f"{tmp}/c")
    assert spark.read.option("header", True).csv(f"{tmp}/c").count() == len(pictures)
# Stop the gateway JVM and wait until it has exited, having written the archive: it exits when
# its stdin closes.
from pyspark import SparkContext
jvm = SparkContext._gateway.proc
spark.stop()
jvm.stdin.close()
jvm.wait(timeout=300)
"""


def _without_archive_options(options: str) -> str:
    """The JVM options with no archive to map (a JVM that writes a dynamic archive maps none)."""
    return re.sub(r"-XX:SharedArchiveFile=\S+", "", options).strip()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    archive = Path(sys.argv[1]).resolve()
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + f".{os.getpid()}.partial")
    options = _without_archive_options(os.environ.get("SPARK_SUBMIT_OPTS", ""))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "SPARK_SUBMIT_OPTS": f"{options} -XX:ArchiveClassesAtExit={partial}",
    }
    start = time.monotonic()
    # The workload's process ends once its JVM has written the archive and exited.
    process = subprocess.Popen(
        [sys.executable, "-c", WORKLOAD],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    output, _ = process.communicate(timeout=600)
    if process.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        print(
            f"jvm_archive: no archive (exit {process.returncode}); the tests' JVMs start"
            f" without one:\n{output[-3000:]}"
        )
        return 0
    partial.replace(archive)
    size = archive.stat().st_size / 1e6
    print(f"jvm_archive: {archive} ({size:.0f} MB) in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
