"""The JVM helpers of the ONNX area (not stages), with named, typed arguments: the only Python
code that names their JVM classes."""

from __future__ import annotations

from typing import Any

from mmlspark.core.jvm import classic_jvm, jvm_class

_DEVICE = "mmlspark.onnx.Device"


def task_assignments(spark: Any, *, tasks: int, hold_millis: int) -> list[str]:
    """``Device.taskAssignments``: one JSON object per task of a job of ``tasks`` tasks, each held
    ``hold_millis``."""
    jvm = classic_jvm(
        spark, feature="gpu_assignments", instead="run it from a classic session on the cluster"
    )
    device = jvm_class(jvm, _DEVICE)
    return [str(row) for row in device.taskAssignments(spark._jsparkSession, tasks, hold_millis)]
