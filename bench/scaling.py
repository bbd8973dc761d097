"""Benchmark: how ONNXModel scales with cores, side by side in one run: local[1], local[2] and a
standalone cluster of two one-core workers on this machine (scripts/spark_services.py), and on
local[1] and local[2] its Python backend too (onnxruntime in the Python workers).

The same model (the ResNet-50 architecture by default: work that should scale) and the same
float32 tensors (from --seed), cached in the executors, batch 64; a master's backends in turn by
the one protocol (bench/protocol.py: --warmups untimed and --repeats timed rounds, the order
reversed every round, the median round), the masters one after another (each is a session of its
own). Reports images/s and a digest of each run's logits (onnx_inference.logit_digest).
Writes bench/results/scaling.md. Not a test: numbers vary with the machine and its load.

Usage: python bench/scaling.py [--model resnet50|tiny] [--images N] [--repeats R] [--warmups W]
       [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import protocol  # noqa: E402
from end_to_end import noop  # noqa: E402
from onnx_inference import (  # noqa: E402
    MODELS,
    logit_digest,
    logits_by_id,
    report,
    seeded_tensors,
    tensor_frame,
)
from spark_services import StandaloneCluster  # noqa: E402


def measure(
    master: str, model: bytes, tensors: np.ndarray, args, python: bool = False
) -> list[tuple[float, dict]]:
    """Images per second of ONNXModel on `master` and the digest of its logits, on the JVM and
    (with `python`) on the Python backend, in that order."""
    import mmlspark
    from mmlspark.onnx import ONNXModel

    spark = mmlspark.session(
        master,
        {
            "spark.ui.enabled": "false",
            "spark.driver.memory": "3g",
            "spark.executor.memory": "3g",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = tensor_frame(spark, tensors, partitions=2)
        stages = {}
        for backend in ("jvm", "python") if python else ("jvm",):
            onnx = ONNXModel(inputCol="tensor", outputCol="logits", miniBatchSize=args.batch)
            stages[backend] = onnx.setBackend(backend).setModelPayload(model)
        # The backends of one master in turn, by the one protocol; the masters one after another
        # (each is a session of its own).
        rounds = protocol.measure(
            {b: (lambda s=s: noop(s.transform(df))) for b, s in stages.items()},
            warmups=args.warmups,
            rounds=args.repeats,
        )
        return [
            (rounds[b].rate(len(tensors)).median, logit_digest(logits_by_id(s.transform(df))))
            for b, s in stages.items()
        ]
    finally:
        spark.stop()


def run(argv: list[str] | None = None) -> dict:
    """Runs the benchmark with command-line arguments `argv` (default: sys.argv's), writes its
    table and JSON, and returns its figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of every contender")
    parser.add_argument("--warmups", type=int, default=1, help="untimed rounds before them")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1, help="of the random input tensors")
    parser.add_argument(
        "--quick", action="store_true", help="tiny CNN, 256 images, 1 repeat, no warm-up"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "scaling.md"))
    parser.add_argument(
        "--standalone",
        metavar="URL",
        help="master URL of a running standalone cluster of two one-core workers to measure on "
        "(default: start one on this machine)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.images, args.repeats, args.warmups = "tiny", 256, 1, 0
    build, size, _ = MODELS[args.model]
    model = build()
    tensors = seeded_tensors(args.seed, args.images, size)
    rates: dict[str, float] = {}
    python: dict[str, float] = {}
    logits: dict[str, dict] = {}
    for master in ("local[1]", "local[2]"):
        (rates[master], logits[master]), on_python = measure(
            master, model, tensors, args, python=True
        )
        name = f"{master}, Python backend"
        python[name], logits[name] = on_python
    name = "standalone, 2 workers x 1 core"
    if args.standalone:
        ((rates[name], logits[name]),) = measure(args.standalone, model, tensors, args)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            with StandaloneCluster(Path(tmp), workers=2, cores=1, memory="4g") as cluster:
                cluster.start()
                ((rates[name], logits[name]),) = measure(cluster.master_url, model, tensors, args)
    base, python_base = rates["local[1]"], python["local[1], Python backend"]
    # Each backend's rows against its own local[1].
    speedups = {name: rate / base for name, rate in rates.items()}
    speedups.update({name: rate / python_base for name, rate in python.items()})
    rates.update(python)
    figures = {
        "model": args.model,
        "model_sha256": hashlib.sha256(model).hexdigest(),
        "images": args.images,
        "tensor_seed": args.seed,
        "images_per_s": rates,
        "logits": logits,
        "speedup_local2_vs_local1": rates["local[2]"] / base,
        "python_backend_speedup_local2_vs_local1": python["local[2], Python backend"] / python_base,
        "python_backend_vs_jvm_backend_local2": python["local[2], Python backend"]
        / rates["local[2]"],
    }
    by_rate = {rate: speedups[name] for name, rate in rates.items()}
    report(
        args.out,
        "Scaling benchmark",
        f"python bench/scaling.py --model {args.model} --images {args.images} --repeats"
        f" {args.repeats}{' --quick' if args.quick else ''}",
        f"ONNXModel, batch {args.batch}, tensors cached in the executors; each master's"
        f" backends in turn, {args.warmups} warm-up and {args.repeats} timed rounds each, the"
        " median round.",
        "master | images/s | speed-up vs local[1] (of the same backend)",
        rates,
        lambda rate: by_rate[rate],
        "local[1] -> local[2] >= 1.8x",
        figures,
    )
    return figures


def main() -> None:
    print(json.dumps(run()))  # the last line of output: the figures


if __name__ == "__main__":
    main()
