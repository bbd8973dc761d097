"""Python-backend stages that follow one another run in one Arrow UDF.

Each stage of the Python backend is a ``mapInArrow`` step: Arrow batches in, the same rows with
the stage's columns added out. Run one by one, every step is a Python worker of its own, every
row crosses between the JVM and Python once per stage, and Spark hands each step's tasks to any
idle worker, so a worker that holds a model's onnxruntime session is often not the one that runs
the model next. So when a stage's input DataFrame is the unchanged output of such steps (as in
``read_images`` -> ``ImageTransformer`` -> ``ONNXModel``, or a ``PipelineModel`` of them), its
step is appended to theirs and the whole chain runs in one UDF over their input: one worker per
task, rows decoded, transformed and scored without leaving Python. Stages that change the types
of their columns after the UDF (vector outputs) end a chain, and a cached input is never
recomputed.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mmlspark._engine.rows import Partition, Task
from mmlspark.core.arrow_map import map_in_arrow

__all__ = ["Step", "run_step"]


@dataclass(frozen=True)
class Step:
    """One stage's work: ``run(plan, batches, task)``, a partition function of the engine
    (``mmlspark._engine``), yields the batches with its columns added."""

    run: Partition
    plan: Any


@dataclass(frozen=True)
class _Chain:
    source: Any  # the DataFrame the first step reads
    steps: tuple[Step, ...]
    finishes: tuple[Callable[[Any], Any], ...]  # DataFrame -> DataFrame, after the UDF
    output: weakref.ReferenceType[Any]  # the DataFrame the chain made


# The chains by the id of the DataFrame they made (dropped when that DataFrame is).
_CHAINS: dict[int, _Chain] = {}


def _task() -> Task:
    """The Spark task this worker runs, as the engine takes it (the engine imports no pyspark)."""
    from pyspark import SparkFiles, TaskContext

    context = TaskContext.get()
    if context is None:
        return Task(files=SparkFiles.get)
    gpus = context.resources().get("gpu")
    addresses = None if gpus is None else tuple(gpus.addresses)
    return Task(gpus=addresses, cpus=context.cpus(), files=SparkFiles.get)


def _chained(steps: tuple[Step, ...], batches: Iterator[Any]) -> Iterator[Any]:
    task = _task()
    for step in steps:
        batches = step.run(step.plan, batches, task)
    return batches


def _is_cached(df: Any) -> bool:
    if getattr(df, "is_cached", False):
        return True
    try:
        level = df.storageLevel
    except Exception:  # noqa: BLE001 (no storage level to read: not cached)
        return False
    return bool(level.useMemory or level.useDisk or level.useOffHeap)


def _chain_of(dataset: Any) -> _Chain | None:
    chain = _CHAINS.get(id(dataset))
    if chain is None or chain.output() is not dataset or _is_cached(dataset):
        return None
    return chain


def run_step(
    dataset: Any,
    step: Step,
    added: list[Any],
    finish: Callable[[Any], Any],
    ends_chain: bool = False,
    keep: tuple[str, ...] | None = None,
) -> Any:
    """`dataset` with the columns `added` (StructFields) computed by `step` in an Arrow UDF, then
    `finish` applied (metadata, filters); fused with the steps that made `dataset` when it is
    their unchanged output. The step's code travels to the workers by value (this module and the
    engine: see ``map_in_arrow``). `ends_chain`: `finish` changes column types, so no later step
    may join this chain. `keep`: the columns of `dataset` the step passes on (default: all)."""
    from pyspark import cloudpickle
    from pyspark.sql import types as T

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    prior = _chain_of(dataset)
    steps: tuple[Step, ...]
    finishes: tuple[Callable[[Any], Any], ...]
    if prior is None:
        source, steps, finishes = dataset, (step,), (finish,)
    else:
        source, steps = prior.source, (*prior.steps, step)
        finishes = (*prior.finishes, finish)
    kept = [f for f in dataset.schema.fields if keep is None or f.name in keep]
    schema = T.StructType(kept + list(added))
    out = map_in_arrow(source, lambda batches: _chained(steps, batches), schema)
    for apply in finishes:
        out = apply(out)
    if not ends_chain:
        key = id(out)
        _CHAINS[key] = _Chain(source, steps, finishes, weakref.ref(out))
        weakref.finalize(out, _CHAINS.pop, key, None)
    return out
