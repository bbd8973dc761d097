"""The mini-batching of FixedMiniBatchTransformer on the Python backend, in an Arrow UDF
(``mapInArrow``): each partition's rows, in the order the partition holds them, grouped into
batches of a fixed size, one output row per batch with every column an array of the batch's
values (the last batch of a partition may be smaller), as ``MiniBatching.batch`` does on the JVM.

Part of the engine (``mmlspark._engine``): it travels to the Python workers by value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["fixed_batches"]


def _as_batch_rows(table: Any, size: int) -> Any:
    """One Arrow record batch with a row per `size` consecutive rows of `table` (one chunk)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    rows = table.num_rows
    offsets = pa.array(list(range(0, rows, size)) + [rows], pa.int32())
    columns = [pa.ListArray.from_arrays(offsets, column.chunk(0)) for column in table.columns]
    return pa.RecordBatch.from_arrays(columns, names=table.column_names)


def fixed_batches(size: int, batches: Iterator[Any]) -> Iterator[Any]:
    """The batch rows of one partition, whose rows arrive as the Arrow record batches
    `batches`: a batch may span several of them."""
    import pyarrow as pa

    pending: list[Any] = []
    rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        if rows < size:
            continue
        table = pa.Table.from_batches(pending).combine_chunks()
        complete = rows - rows % size
        yield _as_batch_rows(table.slice(0, complete).combine_chunks(), size)
        rest = table.slice(complete)
        pending = rest.to_batches() if rest.num_rows else []
        rows = rest.num_rows
    if rows:
        yield _as_batch_rows(pa.Table.from_batches(pending).combine_chunks(), size)
