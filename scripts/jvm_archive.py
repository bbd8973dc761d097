"""A class-data-sharing archive of the classes the test suite's Spark drivers load (make test).

    python scripts/jvm_archive.py ARCHIVE    # writes ARCHIVE (about 190 MB); prints its options

Every Spark driver a test starts (the shared session, each camera-trap CLI, each notebook's
kernel) spends seconds of CPU loading and verifying the same few thousand classes of Spark's
jars. With a JDK 17 dynamic archive (-XX:ArchiveClassesAtExit) of those classes, made once per
`make test` by a session that does what the tests do most, each later driver maps them instead
(measured here: a session start and its first jobs take 9 CPU-seconds instead of 14). The
archive holds the JDK's and the primary pyspark's classes only: a JVM on another classpath (a
cluster's executors) leaves it unused, and -Xlog:cds*=off keeps the JVM's notice of that off the
processes' output, which tests read. The other lines' runs do not get it: another JDK (their
JDK 21) refuses it and its own archive with it.

The options printed (``-XX:SharedArchiveFile=ARCHIVE -Xlog:cds*=off``) go into the drivers'
SPARK_SUBMIT_OPTS; results are the same with or without them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def options(archive: Path) -> str:
    """The JVM options that use `archive`."""
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"


def workload(folder: Path) -> None:
    """What the suite's drivers do most, in one session like the tests' (conftest's `spark`):
    SQL and DataFrames, Parquet and JSON, Arrow to pandas, and mmlspark's image reader,
    ImageTransformer and ONNXModel. (Fitting an ML pipeline too made the archive 40 MB larger
    and its making 16 CPU-seconds longer.)"""
    import cv2
    import numpy as np
    from onnx import TensorProto, helper

    import mmlspark
    from mmlspark.image import read_images
    from mmlspark.onnx import ONNXModel
    from mmlspark.opencv import ImageTransformer

    spark = mmlspark.session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    rows = [(float(i % 7), f"c{i % 3}", "yes" if i % 2 else "no") for i in range(60)]
    df = spark.createDataFrame(rows, "a double, color string, label string")
    df.groupBy("color").count().orderBy("color").collect()
    df.write.parquet(str(folder / "table.parquet"))
    df.write.json(str(folder / "table.json"))
    spark.read.parquet(str(folder / "table.parquet")).toPandas()
    images = folder / "images"
    images.mkdir()
    for i in range(4):
        pixels = np.full((48, 64, 3), 40 * i, np.uint8)
        cv2.imwrite(str(images / f"{i}.jpg"), pixels)
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)],
        "mean",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    photos = read_images(spark, str(images))
    tensors = ImageTransformer(inputCol="image", outputCol="x", toTensor=True).resize(16, 16)
    scored = ONNXModel(feedDict={"x": "x"}, fetchDict={"y": "y"})
    scored.setModelPayload(onnx_model.SerializeToString())
    scored.transform(tensors.transform(photos)).select("y").collect()
    spark.stop()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    archive = Path(sys.argv[1]).resolve()
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    os.environ["SPARK_SUBMIT_OPTS"] = (
        f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -XX:ArchiveClassesAtExit={partial} "
        "-Xlog:cds*=off"  # a warning a class for each it cannot archive (generated, signed)
    ).strip()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as folder:
        workload(Path(folder))
    # The JVM writes the archive as it exits, which it does when its gateway's stdin closes.
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None
    gateway.shutdown()
    process = gateway.proc  # type: ignore[attr-defined]
    process.stdin.close()
    process.wait(timeout=300)
    if not partial.is_file():
        print(f"jvm_archive: the JVM wrote no archive at {partial}", file=sys.stderr)
        return 1
    partial.rename(archive)
    size = archive.stat().st_size / 2**20
    print(
        f"jvm_archive: {archive} ({size:.0f} MiB) in {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    print(options(archive))
    return 0


if __name__ == "__main__":
    sys.exit(main())
