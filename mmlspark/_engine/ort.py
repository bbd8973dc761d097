"""ONNXModel in the Python workers: onnxruntime sessions, and the partitions that feed rows to
them and add the fetched columns, as the JVM stage (``scala/.../onnx``) does: batching of
consecutive rows of one shape, flat outputs, softmax and argmax, and the same ``errorCol``
messages for bad rows. Each Python worker keeps one onnxruntime session per (model content,
device, settings) across batches and tasks."""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError, Task, list_array
from mmlspark._engine.tensors import (
    Feed,
    Fetch,
    Spec,
    _to_dtype,
    column_values,
    resolve,
    row_input,
    spec_of,
    type_name,
)

#: The environment onnxruntime gets in every process that loads it, unless already set: without
#: it, onnxruntime 1.29 writes a `mat-debug-<pid>.log` and a `.ses` file into the temporary folder
#: of each process and leaves them there. (mmlspark.session() and spark_conf() give the same to
#: the JVMs and the Python workers Spark starts.)
ENVIRONMENT = {"ORT_DISABLE_TELEMETRY": "1"}


def onnxruntime() -> Any:
    """The onnxruntime module, imported with ENVIRONMENT's defaults set."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    import onnxruntime as ort  # type: ignore[import-untyped]

    return ort


_LEVELS = {
    "none": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


# One session per (model digest, providers, settings) per Python worker process, kept across
# batches and tasks. This module travels by value, so each task gets a fresh copy of its globals;
# the cache lives in a namespace registered in the worker's sys.modules instead.
_CACHE = "_mmlspark_python_backend_sessions"


def _cache() -> Any:
    cache = sys.modules.get(_CACHE)
    if cache is None:
        fresh = types.ModuleType(_CACHE)
        fresh.sessions = {}  # type: ignore[attr-defined]
        fresh.lock = threading.Lock()  # type: ignore[attr-defined]
        fresh.created = []  # type: ignore[attr-defined]  # the keys, as sessions are made
        cache = sys.modules.setdefault(_CACHE, fresh)
    return cache


def _session(
    model: bytes,
    digest: str,
    providers: tuple[Any, ...],
    settings: tuple[Any, ...],
    model_file: str | None = None,
    files: Callable[[str], str] | None = None,
) -> Any:
    """The worker's session for the model (`model`, or the file shipped to the executors as
    `model_file`, found with `files`), made on first use."""
    key = (digest, providers, settings)
    cache = _cache()
    with cache.lock:
        found = cache.sessions.get(key)
        if found is None:
            ort = onnxruntime()
            options = ort.SessionOptions()
            level, threads = settings
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[level])
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = threads
            if model_file is not None:
                if files is None:
                    raise RuntimeError(
                        f"the model was shipped to the executors as {model_file}, but this task "
                        "cannot look up shipped files"
                    )
                source: Any = files(model_file)  # shipped once per executor
            else:
                source = model
            found = ort.InferenceSession(
                source, sess_options=options, providers=_provider_args(providers)
            )
            asked = [p[0] for p in providers if isinstance(p, tuple)]
            missing = [p for p in asked if p not in found.get_providers()]
            if missing:
                # onnxruntime falls back to the CPU where a provider fails to load; the JVM's
                # session fails instead, and a run that was asked for a GPU must not crawl on a CPU.
                raise RuntimeError(
                    f"onnxruntime could not start {', '.join(missing)} (the session has "
                    f"{', '.join(found.get_providers())}); its message is above in the worker's "
                    "log. Check that onnxruntime-gpu and its CUDA libraries are installed on the "
                    "executors, or set deviceType to 'cpu'"
                )
            cache.sessions[key] = found
            cache.created.append(key)
        return found


def model_specs(model: bytes, what: str = "the model") -> tuple[list[Spec], list[Spec]]:
    """The model's inputs and outputs, read with onnxruntime on the driver; a ValueError naming
    `what` when onnxruntime cannot load it."""
    ort = onnxruntime()
    try:
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime's own exception types are not public
        raise ValueError(
            row_message("notLoadable", what=what, version=ort.__version__, error=error)
        ) from error
    return [spec_of(i) for i in session.get_inputs()], [spec_of(o) for o in session.get_outputs()]


def described(model: bytes, inputs: bool) -> dict[str, dict[str, Any]]:
    """getModelInputs/getModelOutputs as the JVM stage gives them: name -> ``type``, ``shape``
    and ``dimNames``, a sequence of maps as ``sequence<map<key,value>>`` without dimensions."""
    ort = onnxruntime()
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    specs = {}
    for arg in session.get_inputs() if inputs else session.get_outputs():
        name, map_of = type_name(arg.type)
        dims = [] if map_of is not None else list(arg.shape or [])
        specs[arg.name] = {
            "type": name,
            "shape": [d if isinstance(d, int) and d >= 0 else -1 for d in dims],
            "dimNames": [d if isinstance(d, str) else "" for d in dims],
        }
    return specs


@dataclass(frozen=True)
class Plan:
    """Everything a task needs, made on the driver from the stage and the input schema."""

    model: bytes  # empty when the model was shipped to the executors as `model_file`
    digest: str
    feeds: tuple[Feed, ...]
    fetches: tuple[Fetch, ...]
    softmax: tuple[tuple[str, str, bool], ...]  # (fetched column, new column, as vector)
    argmax: tuple[tuple[str, str], ...]
    error_col: str
    batch: int
    vectors: bool
    device: str
    settings: tuple[Any, ...]
    model_file: str | None = None  # the name the task's `files` finds the shipped model under
    cuda_options: tuple[tuple[str, str], ...] = ()  # the CUDA provider options but device_id


def _provider_args(providers: tuple[Any, ...]) -> list[Any]:
    """`providers` (hashable, a session's cache key) as onnxruntime takes them: a name, or a
    (name, options dict) pair."""
    return [(p[0], dict(p[1])) if isinstance(p, tuple) else p for p in providers]


def _providers(
    device: str, task: Task, cuda_options: tuple[tuple[str, str], ...] = ()
) -> tuple[Any, ...]:
    """The execution providers for `device` ("auto", "cpu", "cuda"): CUDA on the task's GPU
    where asked, or where "auto" finds both a CUDA provider and a GPU given to the task, with
    `cuda_options` (the stage's cuDNN search, memory limit)."""
    ort = onnxruntime()
    cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    gpus = task.gpus
    if device == "cuda" and not cuda:
        raise RuntimeError(
            "deviceType is 'cuda' but this onnxruntime has no CUDA provider; install "
            "mmlspark[gpu] (onnxruntime-gpu) on the executors"
        )
    if device == "cuda" or (device == "auto" and cuda and gpus is not None):
        address = int(gpus[0]) if gpus else 0
        options = (("device_id", str(address)), *cuda_options)
        return (("CUDAExecutionProvider", options), "CPUExecutionProvider")
    return ("CPUExecutionProvider",)


def _threads(requested: int, task: Task) -> int:
    """Intra-op threads: as requested, else the task's CPUs."""
    if requested > 0:
        return requested
    return max(1, task.cpus) if task.cpus is not None else 1


def softmax_is_double(plan: Plan, column: str, as_vector: bool) -> bool:
    """A softmax column is a double vector, or has the fetched column's element type."""
    source = next(f for f in plan.fetches if f.column == column)
    return plan.vectors or as_vector or source.output.type == "double"


def _softmax(x: np.ndarray) -> np.ndarray:
    """The softmax of `x` over its last axis (a row's values, or rows of them), in float64."""
    d = x.astype(np.float64)
    if d.shape[-1]:
        d = np.exp(d - d.max(axis=-1, keepdims=True))
        d /= d.sum(axis=-1, keepdims=True)
    return d


def _run(plan: Plan, session: Any, rows: list[list[np.ndarray]]) -> list[list[Any]]:
    """Runs rows of one shape together; gives each row's output per fetch: a flat array, or a
    dict for a sequence of maps."""
    feeds = {}
    for i, feed in enumerate(plan.feeds):
        stacked = np.stack([r[i] for r in rows])
        feeds[feed.input.name] = stacked if feed.input.has_batch else stacked[0]
    results = session.run([f.output.name for f in plan.fetches], feeds)
    for fetch, result in zip(plan.fetches, results, strict=True):
        if fetch.output.map_of is not None and len(result) != len(rows):
            raise RuntimeError(
                f"model output '{fetch.output.name}' holds {len(result)} maps, not one per row "
                f"({len(rows)} rows)"
            )
    per_row = []
    for r in range(len(rows)):
        outs = []
        for fetch, result in zip(plan.fetches, results, strict=True):
            if fetch.output.map_of is not None:
                outs.append(result[r])
                continue
            array = np.asarray(result)
            if len(rows) > 1 and (array.ndim == 0 or array.shape[0] != len(rows)):
                raise RuntimeError("an output's first dimension is not the batch")
            flat = array.reshape(len(rows), -1)[r] if len(rows) > 1 else array.reshape(-1)
            outs.append(flat)
        per_row.append(outs)
    return per_row


def partition(plan: Plan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """The rows of `batches` with the fetched (and softmax, argmax and error) columns."""
    providers = _providers(plan.device, task, plan.cuda_options)
    settings = (plan.settings[0], _threads(plan.settings[1], task))
    session = _session(plan.model, plan.digest, providers, settings, plan.model_file, task.files)
    # Arrow hands up to spark.sql.execution.arrow.maxRecordsPerBatch (10,000) rows at once; only
    # one mini-batch of them is held as Python values, so large tensors do not fill the worker.
    step = max(plan.batch, 16)
    for arrow_batch in batches:
        for offset in range(0, arrow_batch.num_rows, step):
            yield _scored(plan, session, arrow_batch.slice(offset, step))


def _uniform_inputs(plan: Plan, batch: Any) -> list[np.ndarray] | None:
    """Each feed's rows as one array [rows, *row shape], straight from the Arrow buffer, where
    every row of every feed is a non-null flat array of numbers of one length: the values and
    shape ``row_input`` gives each such row, with no Python value per row. None otherwise (the
    rows are then taken one by one)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    n = batch.num_rows
    blocks = []
    for feed in plan.feeds:
        column = batch.column(feed.column)
        kind = column.type
        if (
            n == 0
            or not feed.input.has_batch
            or feed.source not in ("float", "int")
            or not (pa.types.is_list(kind) or pa.types.is_large_list(kind))
            or not (pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type))
            or column.null_count
            or column.values.null_count
        ):
            return None
        offsets = column.offsets.to_numpy()
        lengths = np.diff(offsets)
        if (lengths != lengths[0]).any():
            return None
        try:
            shape = resolve(feed.column, feed.input, feed.template, (int(lengths[0]),))
        except RowError:
            return None
        flat = column.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
        blocks.append(_to_dtype(flat, feed.source, feed.dtype).reshape(n, *shape))
    return blocks


def _run_uniform(plan: Plan, session: Any, blocks: list[np.ndarray]) -> list[np.ndarray] | None:
    """Each fetch's outputs of `blocks`, run a mini-batch at a time, as one array [rows, values];
    None where an output is a sequence of maps or a run fails (the rows are then run as
    ``_scored`` runs them, which finds the failing rows)."""
    if any(f.output.map_of is not None for f in plan.fetches):
        return None
    n = len(blocks[0])
    names = [f.output.name for f in plan.fetches]
    parts: list[list[np.ndarray]] = [[] for _ in plan.fetches]
    try:
        for start in range(0, n, plan.batch):
            end = min(n, start + plan.batch)
            feeds = {f.input.name: b[start:end] for f, b in zip(plan.feeds, blocks, strict=True)}
            for part, result in zip(parts, session.run(names, feeds), strict=True):
                array = np.asarray(result)
                if array.ndim == 0 or array.shape[0] != end - start:
                    return None
                part.append(array.reshape(end - start, -1))
    except Exception:  # noqa: BLE001 (retried row by row, as a failing run is)
        return None
    return [np.concatenate(part) for part in parts]


def _scored(plan: Plan, session: Any, batch: Any) -> Any:
    """The output rows of `batch`: its columns, then the stage's."""
    n = batch.num_rows
    blocks = _uniform_inputs(plan, batch)
    uniform = None if blocks is None else _run_uniform(plan, session, blocks)
    if uniform is not None:
        if all(f.output.type != "string" for f in plan.fetches):
            return _uniform_batch(plan, batch, uniform)
        rows = [[output[r] for output in uniform] for r in range(n)]
        return _output_batch(plan, batch, rows, [None] * n)
    columns = {f.column: column_values(f, batch.column(f.column)) for f in plan.feeds}
    inputs: list[list[np.ndarray] | None] = [None] * n
    shapes: list[tuple[Any, ...] | None] = [None] * n
    errors: list[str | None] = [None] * n
    for r in range(n):
        try:
            row = [row_input(f, columns[f.column][r]) for f in plan.feeds]
        except RowError as error:
            errors[r] = str(error)
            continue
        except Exception as error:  # noqa: BLE001 (the JVM gives any row failure as its text)
            errors[r] = f"{type(error).__name__}: {error}"
            continue
        shapes[r] = tuple(s for s, _ in row)
        inputs[r] = [a for _, a in row]
    outputs: list[list[np.ndarray] | None] = [None] * n
    start = 0
    while start < n:
        if inputs[start] is None:
            start += 1
            continue
        end = start + 1
        while (
            end < n
            and end - start < plan.batch
            and inputs[end] is not None
            and shapes[end] == shapes[start]
        ):
            end += 1
        group = list(range(start, end))
        fed = [fed_row for fed_row in (inputs[r] for r in group) if fed_row is not None]
        try:
            ran = _run(plan, session, fed)
            for r, out in zip(group, ran, strict=True):
                outputs[r] = out
        except Exception:  # noqa: BLE001 (a failing run is retried row by row)
            for r, alone in zip(group, fed, strict=True):
                try:
                    outputs[r] = _run(plan, session, [alone])[0]
                except Exception as error:  # noqa: BLE001
                    errors[r] = f"{type(error).__name__}: {error}"
        start = end
    return _output_batch(plan, batch, outputs, errors)


def _uniform_batch(plan: Plan, batch: Any, outputs: list[np.ndarray]) -> Any:
    """The output rows of `batch` where every row ran, from each fetch's outputs as one array
    [rows, values] (numbers): the columns ``_output_batch`` makes, each from whole arrays, with
    no Python value per row."""
    import pyarrow as pa  # type: ignore[import-untyped]

    n = batch.num_rows
    arrays = list(batch.columns)
    names = list(batch.schema.names)
    fetched: dict[str, np.ndarray] = {}
    for fetch, out in zip(plan.fetches, outputs, strict=True):
        fetched[fetch.column] = out
        element = _element(plan, fetch)
        values = out.astype(element.to_pandas_dtype(), copy=False)
        if fetch.output.row_shape:
            arrays.append(_lists(values, element))
        else:
            arrays.append(pa.array(values[:, 0], type=element))
        names.append(fetch.column)
    for column, new, as_vector in plan.softmax:
        double = softmax_is_double(plan, column, as_vector)
        d = _softmax(fetched[column])
        element = pa.float64() if double else pa.float32()
        arrays.append(_lists(d.astype(element.to_pandas_dtype(), copy=False), element))
        names.append(new)
    for column, new in plan.argmax:
        out = fetched[column]
        if out.shape[1]:
            arrays.append(pa.array(np.argmax(out, axis=1).astype(np.float64)))
        else:
            arrays.append(pa.nulls(n, pa.float64()))
        names.append(new)
    arrays.append(pa.nulls(n, pa.string()))
    names.append(plan.error_col)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _lists(values: np.ndarray, element: Any) -> Any:
    """An Arrow list array, one list a row of `values` [rows, values], no null row."""
    import pyarrow as pa  # type: ignore[import-untyped]

    rows, width = values.shape
    offsets = np.arange(rows + 1, dtype=np.int32) * np.int32(width)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=element)
    return pa.ListArray.from_arrays(pa.array(offsets), flat)


def _output_batch(plan: Plan, batch: Any, outputs: list[Any], errors: list[str | None]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    arrays = list(batch.columns)
    names = list(batch.schema.names)
    fetched: dict[str, list[Any]] = {}
    for i, fetch in enumerate(plan.fetches):
        values: list[Any] = []
        for out in outputs:
            if out is None:
                values.append(None)
                continue
            flat = out[i]
            if fetch.output.type in ("float16",):
                flat = flat.astype(np.float32)
            if fetch.output.type == "uint8":
                flat = flat.astype(np.int32)
            values.append(flat)
        fetched[fetch.column] = values
        arrays.append(_arrow(plan, fetch, values))
        names.append(fetch.column)
    for column, new, as_vector in plan.softmax:
        double = softmax_is_double(plan, column, as_vector)
        values = [None if v is None else _softmax(v) for v in fetched[column]]
        element = pa.float64() if double else pa.float32()
        arrays.append(
            pa.array([None if v is None else v.tolist() for v in values], type=pa.list_(element))
        )
        names.append(new)
    for column, new in plan.argmax:
        arrays.append(
            pa.array(
                [
                    None if v is None or v.size == 0 else float(np.argmax(v))
                    for v in fetched[column]
                ],
                type=pa.float64(),
            )
        )
        names.append(new)
    arrays.append(pa.array(errors, type=pa.string()))
    names.append(plan.error_col)
    return pa.RecordBatch.from_arrays(arrays, names=names)


FLOATS = ("float", "double", "float16")

_ARROW = {
    "float": "float32",
    "float16": "float32",
    "double": "float64",
    "int8": "int8",
    "uint8": "int32",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool_",
    "string": "string",
}


def _map_arrow(map_of: tuple[str, str], values: list[dict[Any, Any] | None]) -> Any:
    """One Arrow map array from the rows' dicts (onnxruntime gives a sequence of maps as Python
    dicts): keys and values gathered in one pass each, numbers straight into numpy."""
    import itertools

    import pyarrow as pa  # type: ignore[import-untyped]

    key_type, value_type = (getattr(pa, _ARROW[t])() for t in map_of)
    present = [v for v in values if v is not None]
    lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])

    def gathered(items: Any, kind: Any) -> Any:
        if pa.types.is_string(kind):
            return pa.array(list(items), type=kind)
        return pa.array(np.fromiter(items, dtype=kind.to_pandas_dtype(), count=total), type=kind)

    keys = gathered(itertools.chain.from_iterable(present), key_type)
    items = gathered(itertools.chain.from_iterable(v.values() for v in present), value_type)
    map_type = pa.map_(key_type, value_type)
    entries = pa.StructArray.from_arrays(
        [keys, items], fields=[map_type.key_field, map_type.item_field]
    )
    valid = np.array([v is not None for v in values], dtype=bool)
    # from_buffers takes a null bitmap on every pyarrow (MapArray.from_arrays only from 17 on)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        map_type,
        len(values),
        [bitmap, pa.py_buffer(offsets)],
        null_count=len(values) - len(present),
        children=[entries],
    )


def made_vector(plan: Plan, fetch: Fetch) -> bool:
    """Whether the fetched column becomes a vector (of doubles) after the UDF: a float tensor
    per row, with vector outputs asked for."""
    return bool(fetch.output.row_shape) and plan.vectors and fetch.output.type in FLOATS


def _element(plan: Plan, fetch: Fetch) -> Any:
    """The Arrow type of a fetched column's values: float64 for a float tensor made a vector."""
    import pyarrow as pa  # type: ignore[import-untyped]

    if made_vector(plan, fetch):
        return pa.float64()
    return getattr(pa, _ARROW[fetch.output.type])()


def _arrow(plan: Plan, fetch: Fetch, values: list[Any]) -> Any:
    """The fetched column's Arrow array from the rows' outputs."""
    import pyarrow as pa  # type: ignore[import-untyped]

    if fetch.output.map_of is not None:
        return _map_arrow(fetch.output.map_of, values)
    element = _element(plan, fetch)
    if not fetch.output.row_shape:
        return pa.array([None if v is None else v.item(0) for v in values], type=element)
    if fetch.output.type == "string":
        return pa.array([None if v is None else v.tolist() for v in values], type=pa.list_(element))
    return list_array(values, element)
