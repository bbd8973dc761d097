"""The camera-trap job submitted with spark-submit to a real standalone cluster (a master and two
workers on loopback, scripts/spark_services.py), once as it is and once with an executor killed
(SIGKILL) in the middle of classifying: both give exactly the local-mode results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import mmlspark
from mmlspark.apps.camera_trap import job

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from spark_services import (  # noqa: E402
    EXECUTOR_CLASS,
    SPARK_HOME,
    StandaloneCluster,
    _processes,
    free_port,
)

COPIES = 10  # of the 120 demo photos: enough tasks that one is surely running at the kill


@pytest.fixture
def cluster(standalone_cluster: StandaloneCluster) -> StandaloneCluster:
    return standalone_cluster


def submit(cluster: StandaloneCluster, args: list[str], events: Path, ui_port: int) -> Any:
    """spark-submit of the camera-trap job to the cluster with mmlspark.spark_conf()."""
    conf = {
        **mmlspark.spark_conf(),
        "spark.ui.port": str(ui_port),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": events.as_uri(),
        "spark.executor.memory": "1g",
        "spark.driver.memory": "1g",
        "spark.sql.shuffle.partitions": "4",
    }
    events.mkdir(parents=True, exist_ok=True)
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url]
    command += ["--name", "mmlspark-camera-trap"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [str(ROOT / "mmlspark" / "apps" / "camera_trap" / "__main__.py"), *args]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    )


def finish(process: Any) -> str:
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-6000:]
    return str(output)


def predictions(out: Path) -> list[dict[str, Any]]:
    table = pq.read_table(out / "predictions.parquet").to_pylist()
    return sorted(table, key=lambda r: r["path"])


def assert_same(actual: list[dict[str, Any]], expected: list[dict[str, Any]], root: str) -> None:
    """Same photos (paths relative to their run's folder), labels and confidences."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a["path"].split(root, 1)[1] == e["path"].split(root, 1)[1]
        assert (a["predicted_label"], a["failure"]) == (e["predicted_label"], e["failure"]), a
        if e["confidence"] is None:
            assert a["confidence"] is None, a
        else:
            assert a["confidence"] == pytest.approx(e["confidence"], rel=1e-6, abs=1e-9)


@pytest.mark.system
def test_demo_on_the_cluster_equals_local_mode(cluster, demo_run, tmp_path):
    local, _, local_out = demo_run
    process = submit(
        cluster, ["demo", "--out", str(tmp_path / "cluster")], tmp_path / "ev", free_port()
    )
    output = finish(process)
    assert "[demo] accuracy" in output, output[-3000:]
    expected = predictions(local_out / "predictions")
    actual = predictions(tmp_path / "cluster" / "predictions")
    assert len(actual) == 30
    assert_same(actual, expected, "/data/test/")
    metrics = json.loads((tmp_path / "cluster" / "evaluation" / "metrics.json").read_text())
    assert metrics["accuracy"] == local["accuracy"]
    # The work ran in the cluster's executors: the master lists the application as completed.
    apps = [a for a in cluster.applications() if a["name"] == "mmlspark-camera-trap"]
    assert apps and all(a["cores"] >= 0 for a in apps)


def _rest(ui_port: int, path: str) -> list[dict[str, Any]]:
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=1) as r:
            apps = json.load(r)
        with urllib.request.urlopen(f"{base}/{apps[0]['id']}/{path}", timeout=1) as r:
            return list(json.load(r))
    except (OSError, IndexError, ValueError):
        return []


def _event_log(events: Path) -> list[str]:
    """The lines of the application's event log so far (it is written as the job runs)."""
    return [x for p in events.rglob("*") if p.is_file() for x in p.read_text().splitlines()]


def _lost_tasks(lines: list[str]) -> list[str]:
    return [x for x in lines if '"SparkListenerTaskEnd"' in x and "ExecutorLostFailure" in x]


def _removed(lines: list[str]) -> int:
    return sum('"SparkListenerExecutorRemoved"' in x for x in lines)


def kill_mid_job(ui_port: int, out: Path, events: Path, done: threading.Event) -> dict:
    """Waits until classify is mid-run (a commit made, a task running on an executor), then
    SIGKILLs the executor JVM running it, and reads the event log until Spark has removed that
    executor. A task can finish between the status read and the kill; then no task was lost, and
    it kills again (at most 3 times: Spark allows 4 failures of one task). Returns what it did."""
    kills: list[str] = []
    while not done.is_set() and len(kills) < 3:
        if not any((out / "predictions.parquet").glob("part-*.parquet")):
            time.sleep(0.05)
            continue
        # Any stage: scoring runs in the shuffle stage before each commit's one-file write,
        # which adaptive execution submits under a call site of its own.
        busy = [
            e["id"]
            for e in _rest(ui_port, "executors")
            if e["id"] != "driver" and e.get("activeTasks", 0) >= 1
        ]
        target = next(
            (
                (pid, i)
                for pid, _, cmdline in _processes(EXECUTOR_CLASS)
                for i in busy
                if f"--executor-id {i} " in cmdline + " "
            ),
            None,
        )
        if target is None:
            time.sleep(0.05)
            continue
        removed = _removed(_event_log(events))
        os.kill(target[0], 9)
        kills.append(target[1])
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            if _removed(_event_log(events)) > removed:
                break
            time.sleep(0.2)
        if _lost_tasks(_event_log(events)):
            break
    return {"killed": kills}


@pytest.mark.system
def test_executor_killed_mid_job_loses_and_duplicates_nothing(cluster, spark, demo_model, tmp_path):
    photos = tmp_path / "photos"
    for copy in range(COPIES):
        for photo in (job.DEMO_DATA / "images").glob("*/*.jpg"):
            target = photos / photo.parent.name / f"{copy}_{photo.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(photo, target)
    (photos / "deer" / "broken.jpg").write_bytes(b"not a photo")
    count = COPIES * 120 + 1
    model = demo_model
    # Local mode scores the 120 photos and the broken file once; each copy's row is its photo's.
    once = tmp_path / "once"
    shutil.copytree(job.DEMO_DATA / "images", once)
    shutil.copyfile(photos / "deer" / "broken.jpg", once / "deer" / "broken.jpg")
    job.classify(spark, str(once), str(model), str(tmp_path / "local"), log=lambda _: None)
    expected = []
    for row in predictions(tmp_path / "local"):
        folder, name = row["path"].replace("/once/", "/photos/").rsplit("/", 1)
        copies = [""] if name == "broken.jpg" else [f"{c}_" for c in range(COPIES)]
        expected += [{**row, "path": f"{folder}/{c}{name}"} for c in copies]
    expected.sort(key=lambda r: r["path"])

    ui_port = free_port()
    events = tmp_path / "events"
    args = [
        "classify",
        "--images",
        str(photos),
        "--model",
        str(model),
        "--out",
        str(tmp_path / "killed"),
    ]
    process = submit(cluster, args, events, ui_port)
    done = threading.Event()
    seen: dict[str, Any] = {}
    killed = tmp_path / "killed"
    killer = threading.Thread(
        target=lambda: seen.update(kill_mid_job(ui_port, killed, events, done))
    )
    killer.start()
    try:
        output = finish(process)
    finally:
        done.set()
        killer.join()
    assert seen.get("killed"), "the job finished before an executor could be killed mid-job"

    actual = predictions(tmp_path / "killed")
    paths = [r["path"] for r in actual]
    assert len(paths) == len(set(paths)) == count, output[-3000:]
    assert_same(actual, expected, "/photos/")
    assert sum(r["failure"] is not None for r in actual) == 1

    # Spark saw the executor die and ran its tasks again elsewhere.
    log = _event_log(events)
    assert _removed(log) >= 1, "no executor was removed: the kill did not reach the job"
    assert _lost_tasks(log), f"no task was lost with the executors killed: {seen}"
    print(f"executors killed: {seen['killed']}, tasks lost with them: {len(_lost_tasks(log))}")
