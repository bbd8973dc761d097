"""The benchmarks' quick runs (the smoke runs of tests/test_bench.py), all in one process: one
Python interpreter and one JVM, instead of one of each per benchmark. pyspark keeps its JVM when a
session stops, and the session each benchmark starts reuses it.

Each benchmark runs as `python bench/<name>.py --quick --out DIR/<its table>` would, through its
`run(argv)`. The figures each returns, the error of any that failed and the seconds each took are
printed as JSON on the last line of output and written to DIR/quick.json. Settings a JVM takes only
at launch hold for every session after the first, so the JVM is started first with the largest
heap any of them asks for. Between benchmarks, a session a failed one left is stopped and the ONNX
Runtime sessions no task holds are closed, so that each starts as in a JVM of its own
(onnx_inference.py counts the sessions it creates). Processes a benchmark starts itself
(scaling.py's standalone cluster, unless --standalone names a running one; onnx_inference.py's
raw ONNX Runtime Java) are still its own.

Usage: python bench/quick.py --out DIR [--standalone URL] [NAME ...]   (NAME: image_pipeline, ...)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: Benchmark module: the file of its table (as `make bench` names it).
BENCHMARKS = {
    "image_pipeline": "images.md",
    "onnx_inference": "onnx.md",
    "scaling": "scaling.md",
    "end_to_end": "end_to_end.md",
    "camera_trap": "camera_trap.md",
    "where_time_goes": "where_time_goes.md",
    "detection": "detection.md",
}

#: The JVM's launch settings: the largest heap a benchmark asks for (onnx_inference.py's; the
#: others ask for 4g, 3g or the default).
JVM_SETTINGS = {"spark.driver.memory": "6g"}


def start_jvm() -> None:
    import mmlspark

    # Launch settings become the JVM's defaults for every later session: the progress bars off
    # too (they would bury the output a failure leaves).
    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    spark = mmlspark.session("local[1]", {**settings, **JVM_SETTINGS})
    spark.stop()


def settle() -> None:
    """Stops a session a benchmark left running and closes the ONNX Runtime sessions no task
    holds, so that the next benchmark starts as in a fresh JVM."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    if SparkContext._jvm is not None:
        SparkContext._jvm.mmlspark.onnx.OrtSessions.closeIdle(0)


def run_all(out: Path, names: list[str], standalone: str | None = None) -> dict:
    """Runs the quick mode of each benchmark of `names`, writing its table under `out` (scaling.py
    on the running standalone cluster at `standalone`, where given); returns
    {"figures": {name: figures}, "errors": {name: traceback}, "seconds": {name: seconds}}."""
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"figures": {}, "errors": {}, "seconds": {}}
    start = time.perf_counter()
    start_jvm()
    result["seconds"]["JVM start"] = round(time.perf_counter() - start, 1)
    for name in names:
        start = time.perf_counter()
        try:
            module = importlib.import_module(name)
            argv = ["--quick", "--out", str(out / BENCHMARKS[name])]
            if name == "scaling" and standalone:
                argv += ["--standalone", standalone]
            result["figures"][name] = module.run(argv)
        except Exception:
            result["errors"][name] = traceback.format_exc()
            print(result["errors"][name], file=sys.stderr)
        finally:
            settle()
            result["seconds"][name] = round(time.perf_counter() - start, 1)
    (out / "quick.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder of the tables and quick.json")
    parser.add_argument("--standalone", metavar="URL", help="scaling.py's --standalone")
    parser.add_argument("names", nargs="*", help=f"of {', '.join(BENCHMARKS)} (default: all)")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"no benchmark {', '.join(unknown)}; there are {', '.join(BENCHMARKS)}")
    names = [name for name in BENCHMARKS if name in args.names or not args.names]
    result = run_all(Path(args.out), names, args.standalone)
    print(json.dumps(result))  # the last line of output
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
