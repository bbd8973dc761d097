"""Runs commands at the same time, each with its output in a log of its own, and prints each log
whole as its command ends, with its wall time; exits with the first failing command's code.

    python3 scripts/side_by_side.py "NAME=COMMAND" "NAME=COMMAND" ...

`make test` runs the primary pytest suite and the Spark-line matrix this way: each is a chain of
processes that leaves one of the two cores idle much of the time (JVM starts, py4j round trips,
waits on subprocesses), so together they take less wall time than one after the other.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(specs: list[str]) -> int:
    if not specs or any("=" not in s for s in specs):
        raise SystemExit(__doc__)
    logs = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    started = time.monotonic()
    running = {}
    for i, spec in enumerate(specs):
        name, command = spec.split("=", 1)
        log = (logs / f"{i}.log").open("w")
        process = subprocess.Popen(command, shell=True, stdout=log, stderr=subprocess.STDOUT)
        running[process] = (name, log)
        print(f"[side by side] started {name}: {command}", flush=True)
    code = 0
    while running:
        for process in [p for p in running if p.poll() is not None]:
            name, log = running.pop(process)
            log.close()
            seconds = time.monotonic() - started
            print(f"\n[side by side] ===== {name}: exit {process.returncode} =====", flush=True)
            sys.stdout.write(Path(log.name).read_text(errors="replace"))
            print(f"[phase] {name}: {seconds:.0f} s (exit {process.returncode})", flush=True)
            code = code or process.returncode
        time.sleep(1)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
