"""The row plumbing the engine's partitions share: row errors, the task a partition runs in, the
loop that computes a partition's rows a slice at a time into bounded output batches, and Arrow
list arrays made from numpy arrays without a Python value per element."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Rows read from an Arrow batch at a time (a batch may hold thousands of photos).
ROWS_PER_SLICE = 16
#: An output batch is written once it holds this many rows or bytes of output.
OUT_ROWS, OUT_BYTES = 64, 64 << 20


class RowError(ValueError):
    """A row the stage cannot compute; its message is the row's error, as the JVM gives a rejected
    input's (IllegalArgumentException) message."""


def describe(error: BaseException) -> str:
    """The error column's text for a row that failed with `error`."""
    if isinstance(error, RowError):
        return str(error)
    if isinstance(error, MemoryError):
        return (
            f"out of memory on this executor ({error}); the row was skipped and its memory "
            "released. Lower the image or batch size, or give the executors more memory"
        )
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class Task:
    """What the Spark task that runs a partition tells the engine, read in the worker from
    pyspark's ``TaskContext`` and ``SparkFiles`` (``mmlspark.core.fused``): the engine itself
    imports no pyspark."""

    #: The addresses of the task's ``gpu`` resource; None where it has none.
    gpus: tuple[str, ...] | None = None
    #: The task's CPUs (``spark.task.cpus``); None outside a Spark task.
    cpus: int | None = None
    #: The local path of a file shipped to the executors, by its name (``SparkFiles.get``).
    files: Callable[[str], str] | None = None


#: A partition function: the plan, the partition's Arrow batches and its task -> Arrow batches.
Partition = Callable[[Any, Iterator[Any], Task], Iterator[Any]]


def computed(
    batches: Iterator[Any],
    inputs: Callable[[Any], Iterable[tuple[tuple[Any, ...], str | None]]],
    compute: Callable[..., Any],
    size_of: Callable[[Any], int],
    min_rows: int = 0,
) -> Iterator[tuple[Any, list[Any], list[str | None]]]:
    """The rows of `batches` computed one by one: ``(rows, values, errors)`` per output batch,
    `rows` the slice of an input batch that `values` and `errors` belong to (an empty input batch
    gives one empty output). `inputs(part)` gives each row of a slice of ROWS_PER_SLICE rows as
    ``(arguments of compute, earlier error)``: a row with an earlier error keeps it and is not
    computed; a row whose `compute` raises gets a null value and the error's description. An
    output batch is written once it holds at least `min_rows` rows and OUT_ROWS rows or OUT_BYTES
    bytes (`size_of` a value), and at the end of each input batch, so that a next step in the same
    UDF gets full mini-batches while memory stays bounded on large photos."""
    for batch in batches:
        total = batch.num_rows
        if total == 0:
            yield batch, [], []
            continue
        values: list[Any] = []
        errors: list[str | None] = []
        size, first = 0, 0
        for offset in range(0, total, ROWS_PER_SLICE):
            part = batch.slice(offset, ROWS_PER_SLICE)
            for arguments, earlier in inputs(part):
                if earlier is not None:
                    values.append(None)
                    errors.append(earlier)
                    continue
                try:
                    values.append(compute(*arguments))
                    errors.append(None)
                    size += size_of(values[-1])
                except Exception as error:  # noqa: BLE001 (a failing row keeps its reason)
                    values.append(None)
                    errors.append(describe(error))
            end = offset + part.num_rows
            full = len(values) >= min_rows and (size >= OUT_BYTES or len(values) >= OUT_ROWS)
            if full or end == total:
                yield batch.slice(first, end - first), values, errors
                values, errors, size, first = [], [], 0, end


def list_array(values: list[np.ndarray | None], element: Any) -> Any:
    """One Arrow list array of `element` values from the rows' flat numpy arrays (None: a null
    row), without a Python value per element."""
    import pyarrow as pa  # type: ignore[import-untyped]

    lengths = np.array([0 if v is None else v.size for v in values], dtype=np.int64)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [v.reshape(-1) for v in values if v is not None]
    flat = np.concatenate(present) if present else np.zeros(0)
    mask = pa.array(np.array([v is None for v in values], dtype=bool))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=element), mask=mask)


def list_views(column: Any) -> list[np.ndarray | None]:
    """The rows of an Arrow list column of numbers without null elements as numpy views of its
    buffer (None: a null row)."""
    values = column.values.to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [values[offsets[r] : offsets[r + 1]] if valid[r] else None for r in range(len(column))]
