"""Spark's GPU scheduling on this CPU machine: a local cluster whose workers report fake GPU
addresses. Each task must be bound to the GPU Spark assigned to it (never a hard-coded 0), and
ONNXModel with deviceType 'auto' must still run, on the CPU, where CUDA is missing."""

from __future__ import annotations

import json
import textwrap

from conftest import run_job

SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[2])
    import mmlspark
    import onnx_models
    from mmlspark.onnx import ONNXModel, gpu_assignments

    discovery = sys.argv[1]
    spark = mmlspark.session("local-cluster[2,2,1024]", {
        "spark.ui.enabled": "false",
        "spark.worker.resource.gpu.amount": "2",
        "spark.worker.resource.gpu.discoveryScript": discovery,
        "spark.executor.resource.gpu.amount": "2",
        "spark.executor.resource.gpu.discoveryScript": discovery,
        "spark.task.resource.gpu.amount": "1",
    })
    print("ASSIGNMENTS " + json.dumps(gpu_assignments(spark, tasks=8, hold_millis=1500)))
    rows = [(i, [float(i), 1.0, 2.0]) for i in range(20)]
    df = spark.createDataFrame(rows, "id int, a array<float>").repartition(4)
    model = ONNXModel(feedDict={"a": "a", "b": "a"}, fetchDict={"s": "sum"}, deviceType="auto")
    rows = model.setModelPayload(onnx_models.two_in_two_out()).transform(df).collect()
    assert sorted(r.id for r in rows) == list(range(20))
    assert all(r.s == [2.0 * r.id, 2.0, 4.0] and r.onnxError is None for r in rows), rows
    print("onnx-ok")
    spark.stop()
    """
)


def test_each_task_binds_to_its_own_gpu_address(tmp_path):
    discovery = tmp_path / "gpus.sh"
    discovery.write_text('#!/usr/bin/env bash\necho \'{"name": "gpu", "addresses": ["3", "7"]}\'\n')
    discovery.chmod(0o755)
    result = run_job(tmp_path, SCRIPT, str(discovery))
    line = next(x for x in result.stdout.splitlines() if x.startswith("ASSIGNMENTS "))
    tasks = json.loads(line[len("ASSIGNMENTS ") :])
    assert len(tasks) == 8
    for task in tasks:
        assert len(task["gpus"]) == 1 and task["gpus"][0] in ("3", "7"), task
        assert task["device"] == f"cuda:{task['gpus'][0]}", task
        assert task["cudaAvailable"] is False  # the CPU build of ONNX Runtime
    # Tasks that ran at the same time on one executor hold different GPUs.
    overlapping = 0
    for i, a in enumerate(tasks):
        for b in tasks[i + 1 :]:
            if a["executor"] == b["executor"] and a["start"] < b["end"] and b["start"] < a["end"]:
                overlapping += 1
                assert a["gpus"] != b["gpus"], (a, b)
    assert overlapping > 0, "no two tasks overlapped on an executor; the check proved nothing"
    assert {t["executor"] for t in tasks} == {"0", "1"}
    assert "onnx-ok" in result.stdout
