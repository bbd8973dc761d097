"""Benchmark: the fixed costs of one `classify` run, phase by phase, with the Spark jobs of each.

`setup` makes a survey of distinct 12 MP JPEGs (camera_trap.make_survey) and trains
a model with the CLI (ResNet-50 architecture, random weights, cut at its pooled features, as
camera_trap.py's CLI contender). `compare` then runs `classify` of the survey into a new folder in
a fresh process per run, alternating the code of two checkouts (`--old`, `--new`: their
repository roots, each with its jars), and reports per phase the median seconds (min-max) and the
median number of Spark jobs (from Spark's event log):
  - listing: from the start of the run (the folder locked, the model loaded) to the first commit,
  - first commit: scoring and committing the first photos (JIT, ONNX Runtime session),
  - other commits: the rest of the scoring,
  - finish: the final table and output files (`run_loop.finish`).
The phases are timed by wrapping run_loop._run, run_loop.finish and Scorer.commit, names both
checkouts must have. Not a test.

Usage: python bench/camera_trap_phases.py setup --work DIR [--photos N]
       python bench/camera_trap_phases.py compare --work DIR --old ROOT --new ROOT [--runs R]
           [--lock FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("listing", "first_commit", "other_commits", "finish", "run")


def setup(work: Path, photos: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import camera_trap
    import models

    work.mkdir(parents=True, exist_ok=True)
    _, model = models.classifier(False)
    (work / "resnet50.onnx").write_bytes(model)
    camera_trap.make_photos(work / "train", 16)
    camera_trap.make_survey(work / "survey", photos)
    node = camera_trap.feature_node(model)
    trained = camera_trap.train_cli(work / "train", work / "resnet50.onnx", work, node)
    trained.rename(work / "model")


def one_run(work: Path, out: Path) -> dict:
    """One classify run in this process (the checkout on sys.path), timed by phase."""
    from mmlspark.apps.camera_trap import run_loop, scorer, scoring
    from mmlspark.apps.camera_trap.session import spark_session

    marks: dict[str, list[float]] = {"commits": []}
    run, finish, commit = run_loop._run, run_loop.finish, scorer.Scorer.commit

    def timed(name: str, function):
        """`function`, recording in marks[name] when its call started and ended."""

        def wrapped(*args, **kwargs):
            marks[name] = [time.time()]
            try:
                return function(*args, **kwargs)
            finally:
                marks[name].append(time.time())

        return wrapped

    def timed_commit(self, *args, **kwargs):
        started = time.time()
        try:
            return commit(self, *args, **kwargs)
        finally:
            marks["commits"].append([started, time.time()])

    run_loop._run, run_loop.finish = timed("run", run), timed("finish", finish)
    scorer.Scorer.commit = timed_commit
    spark = spark_session("local[2]", verbose=False)
    lines: list[str] = []
    summary = scoring.classify(spark, str(work / "survey"), str(work / "model"), str(out),
                               log=lines.append)  # fmt: skip
    spark.stop()
    commits = marks["commits"]
    return {
        "summary": summary,
        "windows": {
            "listing": [marks["run"][0], commits[0][0]],
            "first_commit": commits[0],
            "other_commits": [commits[0][1], commits[-1][1]],
            "finish": marks["finish"],
            "run": marks["run"],
        },
        "commits": len(commits),
    }


def jobs_of(event_dir: Path) -> list[tuple[float, float, str]]:
    """(start, end, call site) of every job in the one event log under `event_dir`."""
    (log,) = list(event_dir.iterdir())
    starts: dict[int, tuple[float, str]] = {}
    jobs = []
    with log.open() as f:
        for line in f:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                properties = event.get("Properties", {})
                site = properties.get("callSite.short") or "{} (query {})".format(
                    event["Stage Infos"][-1]["Stage Name"],
                    properties.get("spark.sql.execution.id", "?"),
                )
                starts[event["Job ID"]] = (event["Submission Time"] / 1000, site)
            elif kind == "SparkListenerJobEnd":
                start, site = starts[event["Job ID"]]
                jobs.append((start, event["Completion Time"] / 1000, site))
    return jobs


def measured(code: Path, work: Path, lock: str | None = None) -> dict:
    """One run of the checkout `code` in a fresh process with Spark's event log on (holding the
    `flock` lock file `lock`, where one is given)."""
    with tempfile.TemporaryDirectory() as tmp:
        conf, events, out = Path(tmp) / "conf", Path(tmp) / "events", Path(tmp) / "out"
        conf.mkdir()
        events.mkdir()
        (conf / "spark-defaults.conf").write_text(
            f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
            "spark.eventLog.rolling.enabled false\nspark.eventLog.compress false\n"
        )
        env = {**os.environ, "PYTHONPATH": str(code), "SPARK_CONF_DIR": str(conf)}
        script = [sys.executable, __file__, "one", "--work", str(work), "--out", str(out)]
        if lock is not None:
            script = ["flock", lock, *script]
        done = subprocess.run(script, env=env, cwd=code, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        jobs = jobs_of(events)
    windows = result["windows"]
    result["seconds"] = {p: windows[p][1] - windows[p][0] for p in PHASES}
    result["jobs"] = {
        p: [site for start, _, site in jobs if windows[p][0] <= start <= windows[p][1]]
        for p in PHASES
    }
    return result


def compare(work: Path, old: Path, new: Path, runs: int, lock: str | None = None) -> dict:
    results: dict[str, list[dict]] = {"old": [], "new": []}
    for i in range(runs):
        for name, code in (
            (("old", old), ("new", new)) if i % 2 == 0 else (("new", new), ("old", old))
        ):
            result = measured(code, work, lock)
            results[name].append(result)
            print(name, {p: round(s, 2) for p, s in result["seconds"].items()},
                  {p: len(j) for p, j in result["jobs"].items()}, flush=True)  # fmt: skip
    report = {}
    for name, rs in results.items():
        report[name] = {
            p: {
                "median_s": round(statistics.median(r["seconds"][p] for r in rs), 2),
                "min_s": round(min(r["seconds"][p] for r in rs), 2),
                "max_s": round(max(r["seconds"][p] for r in rs), 2),
                "jobs": statistics.median(len(r["jobs"][p]) for r in rs),
            }
            for p in PHASES
        }
        report[name]["photos"] = rs[0]["summary"]["photos"]
        report[name]["commits"] = [r["commits"] for r in rs]
        report[name]["finish_jobs"] = rs[-1]["jobs"]["finish"]
        report[name]["listing_jobs"] = rs[-1]["jobs"]["listing"]
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["setup", "compare", "one"])
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--photos", type=int, default=240)
    parser.add_argument("--old", type=Path)
    parser.add_argument("--new", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--lock", help="a lock file each run holds (flock), e.g. a shared one")
    args = parser.parse_args()
    if args.command == "setup":
        setup(args.work, args.photos)
    elif args.command == "one":
        sys.path.insert(0, os.environ["PYTHONPATH"])
        print(json.dumps(one_run(args.work, args.out), default=str))
    else:
        print(json.dumps(compare(args.work, args.old, args.new, args.runs, args.lock), indent=1))


if __name__ == "__main__":
    main()
