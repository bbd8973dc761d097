"""Benchmark: end to end, 640x480 JPEG files -> decode, shorter side to 256, center crop 224,
normalize -> ResNet-50 architecture -> top class, side by side in one run on two cores:
  - mmlspark: read_images + ImageTransformer + ONNXModel (argMaxDict) on local[2], with the
    defaults a user gets (on a CPU the inference service and pinned outputs are off), beside it
    with the service on,
  - mmlspark, Python backend: the same stages with setBackend("python") (opencv-python and
    onnxruntime in Arrow UDFs, as on compute that cannot load the jar),
  - predict_batch_udf: Spark's binaryFile source, a pandas UDF decoding and preprocessing with
    opencv-python, then predict_batch_udf + onnxruntime (one intra-op thread per task) on local[2],
  - raw Python: opencv-python decoding in two threads, onnxruntime with two intra-op threads,
  - SynapseML 1.1.0: Spark's image source, its ImageTransformer and ONNXModel, local[2], in its
    own virtualenv (bench/synapseml_peer.py).
Every contender computes the same top class (checked). The JPEGs are generated in code. One
protocol for all but SynapseML (bench/protocol.py): --warmups untimed and --repeats timed rounds,
the order reversed every round, medians with their range; SynapseML runs in its own process with
the same rounds. Writes bench/results/end_to_end.md. Not a test. The quick (smoke) run has a tiny
CNN in place of ResNet-50 (bench/models.py's quick_classifier).

Usage: python bench/end_to_end.py [--images N] [--repeats R] [--warmups W] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd  # the pandas UDF's type hints name it

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import models  # noqa: E402
import protocol  # noqa: E402
import synapseml_peer  # noqa: E402
from image_pipeline import MEAN, STD, make_jpegs, preprocess  # noqa: E402
from onnx_inference import rates_of, ratios_of, report_rounds, service_on  # noqa: E402

BATCH = 64


def noop(frame) -> None:
    """Runs every row of `frame` through, writing nothing."""
    frame.write.format("noop").mode("overwrite").save()


def tops_of(frame) -> dict[str, int]:
    """Photo file name -> top class, of `frame`'s rows (path, top)."""
    return {Path(r.path).name: int(r.top) for r in frame.collect()}


def mmlspark_pipeline(spark, folder: Path, model: bytes, backend: str = "jvm"):
    from mmlspark.image import read_images
    from mmlspark.onnx import ONNXModel
    from mmlspark.opencv import ImageTransformer

    transform = (
        ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
        .resize(size=256, keepAspectRatio=True)
        .centerCrop(224, 224)
        .normalize(mean=MEAN.tolist(), std=STD.tolist(), colorScaleFactor=1 / 255)
        .setBackend(backend)
    )
    onnx = ONNXModel(
        feedDict={"image": "tensor"},
        fetchDict={"logits": "logits"},
        argMaxDict={"logits": "top"},
        miniBatchSize=BATCH,
    )
    onnx = onnx.setBackend(backend).setModelPayload(model)

    def scored():
        photos = read_images(spark, str(folder), backend=backend)
        return onnx.transform(transform.transform(photos)).select("path", "top")

    return scored


def udf_pipeline(spark, folder: Path, model_path: Path, prepare=preprocess):
    """predict_batch_udf over the binaryFile rows under `folder` (recursively), each photo turned
    into a CHW tensor by `prepare` (encoded bytes -> flat float32 3x224x224) in a pandas UDF, as
    a user would write it: the files' partitions as Spark reads them (no shuffle of the bytes).
    Returns the function of the scored rows (path, top)."""
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import IntegerType

    @pandas_udf("array<float>")
    def to_tensor(content: pd.Series) -> pd.Series:
        return content.map(lambda b: prepare(np.frombuffer(b, np.uint8)))

    # The UDF calls this file's preprocessing: ship its module to the Python workers.
    spark.sparkContext.addPyFile(str(ROOT / "bench" / "image_pipeline.py"))
    path = str(model_path)

    def make_predict_fn():
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        def predict(x: np.ndarray) -> np.ndarray:
            return session.run(None, {"image": x})[0].argmax(axis=1).astype(np.int32)

        return predict

    top = predict_batch_udf(
        make_predict_fn,
        return_type=IntegerType(),
        batch_size=BATCH,
        input_tensor_shapes=[[3, 224, 224]],
    )

    def scored():
        reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
        files = reader.load(str(folder))
        return files.select("path", top(to_tensor(F.col("content"))).alias("top"))

    return scored


def raw_python(paths: list[Path], model_path: Path, prepare=preprocess):
    """opencv-python (`prepare`) in two threads, then onnxruntime with two intra-op threads:
    the function of one run, and the dict (file name -> top class) each run fills."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    result: dict = {}

    def run() -> None:
        with ThreadPoolExecutor(2) as pool:
            tensors = list(pool.map(lambda p: prepare(np.fromfile(p, np.uint8)), paths))
        for start in range(0, len(paths), BATCH):
            batch = np.stack(tensors[start : start + BATCH]).reshape(-1, 3, 224, 224)
            tops = session.run(None, {"image": batch})[0].argmax(axis=1)
            for p, t in zip(paths[start : start + BATCH], tops, strict=True):
                result[p.name] = int(t)

    return run, result


def agree(tops: dict, expected: dict) -> float:
    """The share of images given the same top class as mmlspark's. Random-weight logits can
    tie to the last bits, and batch composition moves those bits, so this is checked to be
    near 1 rather than exactly 1."""
    assert set(tops) == set(expected), "a contender lost or added images"
    share = sum(tops[k] == expected[k] for k in expected) / len(expected)
    assert share >= 0.95, f"only {share:.2f} of the top classes agree with mmlspark's"
    return share


def run(argv: list[str] | None = None) -> dict:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds before them")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="16 images, 1 round, no warm-up, a tiny CNN, no SynapseML",
    )
    synapseml_peer.add_option(parser)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "end_to_end.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.repeats, args.warmups, args.synapseml = 16, 1, 0, False

    import mmlspark

    spark = mmlspark.session(
        "local[2]",
        {"spark.ui.enabled": "false", "spark.driver.memory": "4g"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH))
    model_name, model = models.classifier(args.quick)
    agreement: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "jpegs"
        folder.mkdir()
        paths = make_jpegs(folder, args.images)
        model_path = Path(tmp) / "classifier.onnx"
        model_path.write_bytes(model)
        jvm = mmlspark_pipeline(spark, folder, model)
        python = mmlspark_pipeline(spark, folder, model, backend="python")
        udf = udf_pipeline(spark, folder, model_path)
        raw_run, raw_tops = raw_python(paths, model_path)

        def service_on_run() -> None:
            with service_on(spark):
                noop(jvm())

        rounds = protocol.measure(
            {
                "mmlspark": lambda: noop(jvm()),
                "mmlspark_service_on": service_on_run,
                "mmlspark_python_backend": lambda: noop(python()),
                "predict_batch_udf": lambda: noop(udf()),
                "raw_python": raw_run,
            },
            warmups=args.warmups,
            rounds=args.repeats,
        )
        expected = tops_of(jvm())
        with service_on(spark):
            agreement["mmlspark_service_on"] = agree(tops_of(jvm()), expected)
        agreement["mmlspark_python_backend"] = agree(tops_of(python()), expected)
        agreement["predict_batch_udf"] = agree(tops_of(udf()), expected)
        agreement["raw_python"] = agree(raw_tops, expected)
        measured = rates_of(rounds, args.images)
        if args.synapseml:
            old_model = Path(tmp) / "resnet50-opset13.onnx"
            old_model.write_bytes(models.for_old_runtimes(model))
            peer = synapseml_peer.measure_images(
                old_model, folder, args.images, BATCH, args.repeats
            )
            measured["images_per_s"]["synapseml"] = peer["images_per_s"]
            agreement["synapseml"] = agree(peer["tops"], expected)
    spark.stop()
    rates = measured["images_per_s"]
    figures = {
        "images": args.images,
        "model": model_name,
        "mmlspark_top_classes": expected,
        "top_class_agreement_with_mmlspark": agreement,
        **measured,
        **ratios_of(rounds, RATIOS),
        "ratio_vs_synapseml": rates["mmlspark"] / rates["synapseml"] if args.synapseml else None,
    }
    report_rounds(
        args.out,
        "End-to-end benchmark",
        f"python bench/end_to_end.py --images {args.images} --repeats {args.repeats} --warmups"
        f" {args.warmups}{' --quick' if args.quick else ''}",
        "640x480 JPEG files -> decode -> resize 256 -> center crop 224 -> normalize ->"
        f" {model_name} (random weights) -> top class. Share of top classes equal to mmlspark's:"
        f" {agreement}."
        + (
            f" SynapseML (its own process): {rates['synapseml']:.1f} images/s."
            if args.synapseml
            else ""
        ),
        "images",
        rounds,
        args.images,
        "mmlspark",
        "mmlspark >= 1.5x predict_batch_udf and >= 1.2x SynapseML end to end; its Python backend"
        " >= 1.2x predict_batch_udf and >= 0.8x the JVM backend",
        figures,
    )
    return figures


#: Figure name: (contender, contender) whose per-round rate ratio it is.
RATIOS = {
    "ratio_vs_predict_batch_udf": ("mmlspark", "predict_batch_udf"),
    "ratio_vs_raw_python": ("mmlspark", "raw_python"),
    "python_backend_vs_predict_batch_udf": ("mmlspark_python_backend", "predict_batch_udf"),
    "python_backend_vs_jvm_backend": ("mmlspark_python_backend", "mmlspark"),
    "service_on_vs_off": ("mmlspark_service_on", "mmlspark"),
}


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


if __name__ == "__main__":
    main()
