"""The mini-batching stages on the Python backend, in an Arrow UDF (``mapInArrow``): each
partition's rows, in the order the partition holds them, grouped into batches, one output row per
batch with every column an array of the batch's values, as ``MiniBatching`` does on the JVM.
Flattened, the batches of a partition are its rows, in order, whatever the rule:

- fixed (FixedMiniBatchTransformer, MiniBatchTransformer): `size` rows a batch, the last batch of
  a partition may be smaller;
- buffered (BufferedMiniBatchTransformer): as fixed, but a batch also closes once `max_millis`
  have passed since its first row. The clock is read as rows arrive: a Python worker receives its
  rows in Arrow record batches, all of whose rows arrive together, so the time is checked when a
  record batch arrives (a batch closes at `size` rows or at the first record batch after the
  deadline, whichever comes first);
- dynamic (DynamicMiniBatchTransformer): whatever rows are ready. A thread reads the partition's
  record batches ahead of the batching (up to `ahead` rows, at least one record batch), and each
  batch is the rows received and not yet batched, waiting for the next record batch when there
  are none, up to `most` rows. A fast source gives full batches (at least a record batch's rows,
  ``spark.sql.execution.arrow.maxRecordsPerBatch``, where `most` allows); a slow one gives small
  ones without waiting.

Part of the engine (``mmlspark._engine``): it travels to the Python workers by value.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

__all__ = ["fixed_batches", "buffered_batches", "dynamic_batches", "MAX_READ_AHEAD"]

#: The most rows read ahead of the dynamic batches (the JVM's ``MaxReadAhead``).
MAX_READ_AHEAD = 65536


def _as_batch_rows(table: Any, size: int) -> Any:
    """One Arrow record batch with a row per `size` consecutive rows of `table` (one chunk)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    rows = table.num_rows
    offsets = pa.array(list(range(0, rows, size)) + [rows], pa.int32())
    columns = [pa.ListArray.from_arrays(offsets, column.chunk(0)) for column in table.columns]
    return pa.RecordBatch.from_arrays(columns, names=table.column_names)


def _one_batch(pending: list[Any]) -> Any:
    """The rows of the record batches `pending` as one batch row."""
    import pyarrow as pa

    table = pa.Table.from_batches(pending).combine_chunks()
    return _as_batch_rows(table, max(table.num_rows, 1))


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


def buffered_batches(
    size: int, max_millis: int, batches: Iterator[Any], clock: Any = time.monotonic_ns
) -> Iterator[Any]:
    """The batch rows of one partition: `size` rows a batch, or fewer where a record batch
    arrives `max_millis` or more after the batch's first row (`clock`: nanoseconds)."""
    limit = max_millis * 1_000_000
    pending: list[Any] = []
    rows, start = 0, 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        now = clock()
        if rows and now - start >= limit:
            yield _one_batch(pending)
            pending, rows = [], 0
        offset = 0
        while offset < batch.num_rows:
            if not rows:
                start = now
            part = batch.slice(offset, size - rows)
            pending.append(part)
            rows += part.num_rows
            offset += part.num_rows
            if rows == size:
                yield _one_batch(pending)
                pending, rows = [], 0
    if rows:
        yield _one_batch(pending)


class _ReadAhead:
    """Reads the record batches of `batches` on a thread of its own, up to `ahead` rows ahead of
    the consumer (and at least one record batch); a failure there reaches the consumer after the
    batches read before it."""

    _END = object()

    def __init__(self, batches: Iterator[Any], ahead: int) -> None:
        self._ready: deque[Any] = deque()
        self._rows = 0
        self._ahead = max(1, ahead)
        self._stopped = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(
            target=self._read, args=(batches,), name="mmlspark-read-ahead", daemon=True
        )
        self._thread.start()

    def _read(self, batches: Iterator[Any]) -> None:
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                with self._changed:
                    while self._rows >= self._ahead and not self._stopped:
                        self._changed.wait()
                    if self._stopped:
                        return
                    self._ready.append(batch)
                    self._rows += batch.num_rows
                    self._changed.notify_all()
            item: Any = self._END
        except BaseException as error:  # noqa: BLE001 (handed to the consumer, in order)
            item = error
        with self._changed:
            self._ready.append(item)
            self._changed.notify_all()

    def take(self, wait: bool) -> Any:
        """The next record batch (None: none is ready and not `wait`; the end: ``_END``)."""
        with self._changed:
            while wait and not self._ready:
                self._changed.wait()
            if not self._ready:
                return None
            item = self._ready[0]
            if item is self._END:
                return item
            if isinstance(item, BaseException):
                if not wait:
                    return None  # the rows before it make a batch first
                raise item
            self._ready.popleft()
            self._rows -= item.num_rows
            self._changed.notify_all()
            return item

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()


def dynamic_batches(most: int, ahead: int, batches: Iterator[Any]) -> Iterator[Any]:
    """The batch rows of one partition: each the rows read and not yet batched (waiting for the
    next record batch when there are none), up to `most` rows; a thread reads up to `ahead` rows
    ahead."""
    import pyarrow as pa

    reader = _ReadAhead(batches, ahead)
    try:
        pending: Any = None  # a table of the rows read and not yet batched
        ended = False
        while True:
            if pending is None or pending.num_rows == 0:
                first = reader.take(wait=True)
                if first is _ReadAhead._END:
                    return
                received = [first]
            else:
                received = pending.to_batches()
            rows = sum(b.num_rows for b in received)
            while rows < most and not ended:
                more = reader.take(wait=False)
                if more is None:
                    break
                if more is _ReadAhead._END:
                    ended = True
                    break
                received.append(more)
                rows += more.num_rows
            table = pa.Table.from_batches(received).combine_chunks()
            # Rows for several full batches are all ready: those batches at once.
            size = min(table.num_rows, most)
            full = table.num_rows - table.num_rows % size
            yield _as_batch_rows(table.slice(0, full).combine_chunks(), size)
            pending = table.slice(full)
            if ended and pending.num_rows == 0:
                return
    finally:
        reader.stop()
