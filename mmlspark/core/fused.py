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

Columns can also be left to be computed only where they are read (the JVM's ``DeferredColumns``):
``read_images``' ``image`` on this backend. Its output is recorded with the listing it was read
from (``Deferred``); an ImageTransformer on it reads and decodes each file itself, at the size it
needs, and adds ``image`` back with a Python UDF over the listing's columns, which Spark drops
from any query that does not read it. Stages after it that do not read ``image`` (ONNXModel) run
on the columns under it, and ``image`` is added back after them again.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mmlspark._engine.rows import Partition, Task
from mmlspark.core.arrow_map import column_udf, map_in_arrow

__all__ = [
    "Deferred",
    "FileRead",
    "Step",
    "assemble",
    "deferred_over",
    "defer",
    "deferred_of",
    "reordered",
    "run_step",
]


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


@dataclass(frozen=True)
class FileRead:
    """``read_images``' own read on this backend: its settings (``mmlspark._engine.images``'
    ``Decoding``), the column of the listing's errors, the session's file size setting, and
    `image(df)`: `df` (a DataFrame over the listing's columns) with ``image`` added, computed
    only where it is read."""

    decoding: Any
    listing_error_col: str
    file_setting: str | None
    image: Callable[[Any], Any]


@dataclass(frozen=True)
class Deferred:
    """How a DataFrame with deferred columns was built: `restore(base)` adds the `deferred`
    columns to `base` and the DataFrame is that, its columns in `order`. `read`: set on
    ``read_images``' own output, whose files a stage may read itself."""

    base: Any
    deferred: frozenset[str]
    restore: Callable[[Any], Any]
    order: tuple[str, ...]
    read: FileRead | None = None


# The DataFrames with deferred columns by their id (dropped when the DataFrame is).
_DEFERRED: dict[int, tuple[weakref.ReferenceType[Any], Deferred]] = {}


def defer(df: Any, deferred: Deferred) -> Any:
    """`df`, recorded as built by `deferred`."""
    key = id(df)
    _DEFERRED[key] = (weakref.ref(df), deferred)
    weakref.finalize(df, _DEFERRED.pop, key, None)
    return df


def deferred_of(df: Any) -> Deferred | None:
    """How `df` was built, when it has deferred columns and is not cached (a cached DataFrame's
    columns are computed)."""
    entry = _DEFERRED.get(id(df))
    if entry is None or entry[0]() is not df or _is_cached(df):
        return None
    return entry[1]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def assemble(deferred: Deferred, base: Any, order: tuple[str, ...]) -> Any:
    """`deferred`'s columns restored over `base` (a DataFrame over its base's columns), in
    `order`; recorded so, for the stages after it."""
    out = deferred.restore(base).select(*[_quoted(c) for c in order])
    return defer(out, Deferred(base, deferred.deferred, deferred.restore, order))


def deferred_over(d: Deferred, base: Any, added: tuple[str, ...]) -> Any:
    """A stage's output on ``read_images``' own output `d`, where the stage read the files
    itself: `base` (`d`'s base with the stage's columns) with ``image`` still deferred, its
    columns `d`'s then `added` (the JVM's ``ImageRead.deferredOver``)."""
    assert d.read is not None
    deferred = Deferred(d.base, frozenset({"image"}), d.read.image, d.order)
    return assemble(deferred, base, (*d.order, *added))


def reordered(df: Any, order: list[str]) -> Any:
    """`df` with its columns in `order` (the same names), recorded as built as `df` was, so that a
    stage reading its files itself still does (``spark.read.image()`` puts ``image`` first)."""
    out = df.select(*[_quoted(c) for c in order])
    d = deferred_of(df)
    if d is not None and sorted(order) == sorted(d.order):
        defer(out, Deferred(d.base, d.deferred, d.restore, tuple(order), d.read))
    return out


def _by_column(dataset: Any, step: Step, added: list[Any], reads: tuple[str, ...]) -> Any:
    """`dataset` with the columns `added` by `step`, run as an Arrow UDF over the columns it
    `reads` only (``column_udf``): the rows' other columns stay in the JVM, and only the new
    columns come back. None where the session has no such UDFs."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    names = [f.name for f in added]

    def columns(arrays: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa  # type: ignore[import-untyped]

        batches = (
            pa.RecordBatch.from_arrays(list(a) if isinstance(a, tuple) else [a], names=list(reads))
            for a in arrays
        )
        for out in step.run(step.plan, batches, _task()):
            yield pa.StructArray.from_arrays([out.column(n) for n in names], names=names)

    udf = column_udf(dataset.sparkSession, columns, len(reads), T.StructType(list(added)))
    if udf is None:
        return None
    result = f"__columns_{id(step)}"
    out = dataset.withColumn(result, udf(*[F.col(_quoted(c)) for c in reads]))
    fields = [F.col(result).getField(n).alias(n) for n in names]
    return out.select(*[F.col(_quoted(c)) for c in dataset.columns], *fields)


def run_step(
    dataset: Any,
    step: Step,
    added: list[Any],
    finish: Callable[[Any], Any],
    ends_chain: bool = False,
    keep: tuple[str, ...] | None = None,
    reads: tuple[str, ...] | None = None,
    by_column: bool = False,
) -> Any:
    """`dataset` with the columns `added` (StructFields) computed by `step` in an Arrow UDF, then
    `finish` applied (metadata, filters); fused with the steps that made `dataset` when it is
    their unchanged output. The step's code travels to the workers by value (this module and the
    engine: see ``map_in_arrow``). `ends_chain`: `finish` changes column types, so no later step
    may join this chain. `keep`: the columns of `dataset` the step passes on (default: all).
    `reads`: the columns the step reads (default: any); when `dataset` has deferred columns and
    the step reads none of them, it runs on the columns under them, which stay deferred.
    `by_column`: the step gives each row of its input one row of output, in order, so where it
    starts a chain it may run over the columns it `reads` alone (``_by_column``)."""
    from pyspark import cloudpickle
    from pyspark.sql import types as T

    d = deferred_of(dataset)
    if d is not None and reads is not None and keep is None:
        if all(c not in d.deferred and c in d.base.columns for c in reads):
            out = run_step(d.base, step, added, finish, ends_chain, by_column=by_column)
            new = [c for c in out.columns if c not in d.order and c not in d.base.columns]
            return assemble(d, out, (*d.order, *new))
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    prior = _chain_of(dataset)
    steps: tuple[Step, ...]
    finishes: tuple[Callable[[Any], Any], ...]
    if prior is None:
        source, steps, finishes = dataset, (step,), (finish,)
    else:
        source, steps = prior.source, (*prior.steps, step)
        finishes = (*prior.finishes, finish)
    out = None
    if by_column and prior is None and keep is None and reads:
        out = _by_column(dataset, step, added, reads)
    if out is None:
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
