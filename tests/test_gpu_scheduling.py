"""Spark's GPU scheduling on this CPU machine: a local cluster (one executor of two task slots:
a second executor would check nothing more, for 30 CPU-seconds) whose worker finds GPUs with the
discovery script mmlspark ships, reading a fake ``nvidia-smi`` that lists GPUs 3 and 7. Each
task must be bound to the GPU Spark assigned to it (never a hard-coded 0), tasks given a share of
one GPU must bind to that same GPU (and so to one session, whose key is model, device and
settings), and ONNXModel with deviceType 'auto' must still run, on the CPU, where CUDA is
missing."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from conftest import run_job

#: The two settings, as (GPUs per executor, GPU share per task): one GPU per task, and two tasks
#: on one GPU. Both run in one driver, one local cluster after the other.
SETTINGS = {"own": ("2", "1"), "shared": ("1", "0.5")}

SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[2])
    import mmlspark
    import mmlspark.onnx
    import onnx_models
    from mmlspark.onnx import ONNXModel, gpu_assignments

    discovery = mmlspark.onnx.gpu_discovery_script()
    for setting in sys.argv[1].split(" "):
        name, executor_gpus, task_share = setting.split(",")
        spark = mmlspark.session("local-cluster[1,2,1024]", {
            "spark.ui.enabled": "false",
            "spark.worker.resource.gpu.amount": "2",
            "spark.worker.resource.gpu.discoveryScript": discovery,
            "spark.executor.resource.gpu.amount": executor_gpus,
            "spark.executor.resource.gpu.discoveryScript": discovery,
            "spark.task.resource.gpu.amount": task_share,
        })
        tasks = gpu_assignments(spark, tasks=8, hold_millis=1500)
        print("ASSIGNMENTS " + json.dumps({name: tasks}))
        rows = [(i, [float(i), 1.0, 2.0]) for i in range(20)]
        df = spark.createDataFrame(rows, "id int, a array<float>").repartition(4)
        model = ONNXModel(feedDict={"a": "a", "b": "a"}, fetchDict={"s": "sum"}, deviceType="auto")
        rows = model.setModelPayload(onnx_models.two_in_two_out()).transform(df).collect()
        assert sorted(r.id for r in rows) == list(range(20))
        assert all(r.s == [2.0 * r.id, 2.0, 4.0] and r.onnxError is None for r in rows), rows
        print("onnx-ok " + name)
        spark.stop()
    """
)


@pytest.fixture(scope="module")
def assignments(tmp_path_factory) -> dict[str, list[dict]]:
    """Each setting's task assignments, checked for what holds in both: every task bound to one
    of the listed GPUs, its device named by it, and ONNXModel 'auto' running on the CPU."""
    tmp_path = tmp_path_factory.mktemp("gpus")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text('#!/bin/sh\nprintf "3\\n7\\n"\n')
    (fake / "nvidia-smi").chmod(0o755)
    path = f"{fake}{os.pathsep}{os.environ['PATH']}"
    settings = " ".join(",".join([name, *values]) for name, values in SETTINGS.items())
    result = run_job(tmp_path, SCRIPT, settings, env={"PATH": path})
    found: dict[str, list[dict]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("ASSIGNMENTS "):
            found.update(json.loads(line[len("ASSIGNMENTS ") :]))
    assert set(found) == set(SETTINGS)
    for name, tasks in found.items():
        assert len(tasks) == 8
        assert {t["executor"] for t in tasks} == {"0"}
        for task in tasks:
            assert len(task["gpus"]) == 1 and task["gpus"][0] in ("3", "7"), task
            assert task["device"] == f"cuda:{task['gpus'][0]}", task
            assert task["cudaAvailable"] is False  # the CPU build of ONNX Runtime
        assert f"onnx-ok {name}" in result.stdout
    return found


def overlapping(tasks: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of tasks that ran at the same time on one executor."""
    return [
        (a, b)
        for i, a in enumerate(tasks)
        for b in tasks[i + 1 :]
        if a["executor"] == b["executor"] and a["start"] < b["end"] and b["start"] < a["end"]
    ]


@pytest.mark.system
def test_each_task_binds_to_its_own_gpu_address(assignments):
    tasks = assignments["own"]
    pairs = overlapping(tasks)
    assert pairs, "no two tasks overlapped on an executor; the check proved nothing"
    for a, b in pairs:
        assert a["gpus"] != b["gpus"], (a, b)


@pytest.mark.system
def test_tasks_given_a_share_of_one_gpu_bind_to_it_together(assignments):
    tasks = assignments["shared"]
    pairs = overlapping(tasks)
    assert pairs, "no two tasks overlapped on an executor; the check proved nothing"
    for a, b in pairs:
        assert a["gpus"] == b["gpus"] and a["device"] == b["device"], (a, b)
    # Each executor holds one GPU: all of its tasks name the same device, so its tasks use one
    # session (sessions are keyed by model, device and settings; see ONNXModelSuite).
    by_executor: dict[str, set[str]] = {}
    for task in tasks:
        by_executor.setdefault(task["executor"], set()).add(task["device"])
    assert all(len(devices) == 1 for devices in by_executor.values()), by_executor
