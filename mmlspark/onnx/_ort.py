"""ONNXModel on the Python backend: onnxruntime in an Arrow UDF (``mapInArrow``), no jar.

The row semantics are the JVM stage's (``scala/.../onnx``): the same feeds and fetches, shape
resolution, value casts, batching of consecutive rows of one shape, flat outputs with their
``tensorShape`` metadata, softmax and argmax, and the same ``errorCol`` messages for bad rows.
Each Python worker keeps one onnxruntime session per (model content, device, settings) across
batches and tasks; the model file goes to the executors once (SparkContext.addFile, or a file
artifact over Spark Connect), or, where neither is allowed, with the UDF. The code the tasks run
imports nothing from mmlspark, so that it can travel by value.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["transform", "model_specs"]

# ONNX element type names as the JVM stage writes them -> numpy dtype of the fed array.
_FEED_DTYPES = {
    "tensor(float)": ("float", np.float32),
    "tensor(double)": ("double", np.float64),
    "tensor(float16)": ("float16", np.float16),
    "tensor(int8)": ("int8", np.int8),
    "tensor(uint8)": ("uint8", np.uint8),
    "tensor(int16)": ("int16", np.int16),
    "tensor(int32)": ("int32", np.int32),
    "tensor(int64)": ("int64", np.int64),
    "tensor(bool)": ("bool", np.bool_),
    "tensor(string)": ("string", np.object_),
}
_LEVELS = {
    "none": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


@dataclass(frozen=True)
class Spec:
    """A model input or output: name, element type name (``float``...) and full shape (-1:
    dynamic). `map_of` holds the key and value element types of a sequence of maps (ZipMap's
    output: one map per row), whose type name and shape are the JVM stage's
    (``sequence<map<int64,float>>``, ``[]``)."""

    name: str
    type: str
    shape: tuple[int, ...]
    map_of: tuple[str, str] | None = None

    @property
    def has_batch(self) -> bool:
        return len(self.shape) > 0 and self.shape[0] in (-1, 1)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return self.shape[1:] if self.has_batch else self.shape

    def describe(self) -> str:
        return f"'{self.name}' ({self.type}{_show(self.shape)})"


_SEQUENCE_OF_MAPS = re.compile(r"seq\(map\((\w+),\s*tensor\((\w+)\)\)\)")


def _type_name(onnx_type: str) -> tuple[str, tuple[str, str] | None]:
    """The JVM stage's name of an onnxruntime type (``tensor(float)`` -> ``float``,
    ``seq(map(int64,tensor(float)))`` -> ``sequence<map<int64,float>>``), and a sequence of
    maps' key and value types."""
    maps = _SEQUENCE_OF_MAPS.fullmatch(onnx_type)
    if maps is not None:
        key, value = maps.groups()
        return f"sequence<map<{key},{value}>>", (key, value)
    if onnx_type.startswith("seq("):
        return "sequence", None
    if onnx_type.startswith("map("):
        return "map", None
    return onnx_type.removeprefix("tensor(").rstrip(")"), None


def _spec(arg: Any) -> Spec:
    name, map_of = _type_name(arg.type)
    if map_of is not None:
        return Spec(arg.name, name, (), map_of)
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or []))
    return Spec(arg.name, name, shape)


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
) -> Any:
    key = (digest, providers, settings)
    cache = _cache()
    with cache.lock:
        found = cache.sessions.get(key)
        if found is None:
            import onnxruntime as ort  # type: ignore[import-untyped]

            options = ort.SessionOptions()
            level, threads = settings
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[level])
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = threads
            if model_file is not None:
                from pyspark import SparkFiles

                source: Any = SparkFiles.get(model_file)  # shipped once per executor
            else:
                source = model
            found = ort.InferenceSession(source, sess_options=options, providers=list(providers))
            cache.sessions[key] = found
            cache.created.append(key)
        return found


def model_specs(model: bytes) -> tuple[list[Spec], list[Spec]]:
    """The model's inputs and outputs, read with onnxruntime on the driver."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return [_spec(i) for i in session.get_inputs()], [_spec(o) for o in session.get_outputs()]


def described(model: bytes, inputs: bool) -> dict[str, dict[str, Any]]:
    """getModelInputs/getModelOutputs as the JVM stage gives them: name -> ``type``, ``shape``
    and ``dimNames``, a sequence of maps as ``sequence<map<key,value>>`` without dimensions."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    specs = {}
    for arg in session.get_inputs() if inputs else session.get_outputs():
        name, map_of = _type_name(arg.type)
        dims = [] if map_of is not None else list(arg.shape or [])
        specs[arg.name] = {
            "type": name,
            "shape": [d if isinstance(d, int) and d >= 0 else -1 for d in dims],
            "dimNames": [d if isinstance(d, str) else "" for d in dims],
        }
    return specs


def _show(shape: Any) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


class RowError(Exception):
    """A row's input cannot be fed: the message is the row's errorCol value."""


def _fits(shape: tuple[int, ...], template: tuple[int, ...]) -> bool:
    return len(shape) == len(template) and all(
        t < 0 or t == s for s, t in zip(shape, template, strict=True)
    )


def resolve(
    column: str, spec: Spec, template: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The shape a row of `shape` is fed as, for a model input of row shape `template` (the JVM
    stage's rules, Feed.scala)."""
    count = math.prod(shape)
    expected = math.prod(d for d in template if d >= 0)
    unknown = sum(1 for d in template if d < 0)
    if shape and len(shape) == len(template) and min(shape) >= 0 and not _fits(shape, template):
        from itertools import permutations

        if any(_fits(p, template) for p in permutations(shape)):
            raise RowError(
                f"input column '{column}' holds shape {_show(shape)} but model input "
                f"{spec.describe()} takes {_show(template)}: the same dimensions in another "
                "order (channels first against channels last?); transpose the tensor to the "
                "model's layout"
            )

    def mismatch() -> RowError:  # made only for a row that fails (most rows fit)
        return RowError(
            f"input column '{column}' holds {count} values (shape {_show(shape)}) but model "
            f"input {spec.describe()} needs {_show(template)} per row"
        )

    if len(shape) == len(template):
        if any(t >= 0 and t != s for s, t in zip(shape, template, strict=True)):
            if unknown == 0 and count == expected:
                return template
            raise mismatch()
        return shape
    if unknown == 0:
        if count == expected:
            return template
        raise mismatch()
    if unknown == 1 and expected > 0 and count % expected == 0:
        return tuple(count // expected if d < 0 else d for d in template)
    raise mismatch()


def _nested_shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        return ()
    if not value:
        return (0,)
    shapes = []
    for i, element in enumerate(value):
        if element is None and isinstance(value[0], list):
            raise RowError(f"nested element {i} is null")
        shapes.append(_nested_shape(element))
    for i, s in enumerate(shapes[1:], start=1):
        if s != shapes[0]:
            raise RowError(
                f"ragged nested array: element 0 has shape {_show(shapes[0])}, element {i} "
                f"{_show(s)}"
            )
    return (len(value), *shapes[0])


def _flat(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return [value]
    out: list[Any] = []
    for element in value:
        out.extend(_flat(element))
    return out


def _to_dtype(values: list[Any] | np.ndarray, source: str, dtype: Any) -> np.ndarray:
    """The JVM stage's casts: floating sources through double (then float for the 16-bit
    floats), integer ones through long, wrapping to narrower integers, NaN -> 0."""
    if dtype is np.object_:
        return np.array(values, dtype=np.object_)
    if source == "binary":
        data = np.frombuffer(bytes(values[0]), dtype=np.uint8)
        if dtype == np.uint8:
            return data
        if dtype == np.int8:
            return data.view(np.int8)
        return _to_dtype(data.tolist(), "int", dtype)
    if source in ("float", "double"):
        if isinstance(values, np.ndarray) and values.dtype == dtype and dtype == np.float32:
            return values  # float -> double -> float is exact
        d = np.asarray(values, dtype=np.float64)
        if dtype in (np.float32, np.float64):
            return d.astype(dtype)
        if dtype == np.float16:
            return d.astype(np.float32).astype(np.float16)
        if dtype == np.bool_:
            return d != 0
        longs = np.where(np.isnan(d), 0, np.clip(np.trunc(d), -(2.0**63), 2.0**63 - 1))
        return longs.astype(np.int64).astype(dtype)
    longs = (
        values.astype(np.int64)
        if isinstance(values, np.ndarray)
        else np.asarray([int(v) for v in values], dtype=np.int64)
    )
    if dtype == np.bool_:
        return longs != 0
    if dtype in (np.float32, np.float16):
        return longs.astype(np.float64).astype(np.float32).astype(dtype)
    return longs.astype(dtype)


@dataclass(frozen=True)
class Feed:
    input: Spec
    column: str
    source: str  # 'float', 'double', 'int', 'bool', 'string', 'binary', 'vector'
    template: tuple[int, ...]
    dtype: Any


@dataclass(frozen=True)
class Fetch:
    column: str
    output: Spec


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
    model_file: str | None = None  # the name SparkFiles.get finds the shipped model under


def _source(data_type: Any) -> tuple[str, int]:
    """The element kind and the array depth of a Spark column type."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    depth = 0
    while isinstance(data_type, T.ArrayType):
        data_type, depth = data_type.elementType, depth + 1
    if isinstance(data_type, VectorUDT):
        return "vector", depth
    if isinstance(data_type, T.BinaryType):
        return "binary", depth
    if isinstance(data_type, T.BooleanType):
        return "bool", depth
    if isinstance(data_type, T.StringType):
        return "string", depth
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return "float", depth
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int", depth
    return "unsupported", depth


def _mapping(stage: Any, name: str) -> dict[str, str]:
    return dict(json.loads(stage.getOrDefault(name)))


def _only(stage: Any, param: str, mapping: str, specs: list[Spec], advice: str) -> Spec:
    """The model's one input (or output) that `param` names when `mapping` is empty."""
    kind = "input" if param == "inputCol" else "output"
    if not stage.isDefined(param):
        raise ValueError(
            f"ONNXModel {stage.uid}: set {param} (a model with one {kind}) or {mapping}"
        )
    if len(specs) != 1:
        raise ValueError(
            f"ONNXModel {stage.uid}: the model has {len(specs)} {kind}s ("
            + ", ".join(s.describe() for s in specs)
            + f"); {advice}"
        )
    return specs[0]


def plan(stage: Any, model: bytes, schema: Any) -> Plan:
    """Checks the stage against the model and the input schema (failing before any job, as the
    JVM stage does) and gives the plan the tasks run."""
    name = f"ONNXModel {stage.uid}"

    def fail(message: str) -> Any:
        raise ValueError(f"{name}: {message}")

    inputs, outputs = model_specs(model)
    wanted = list(dict.fromkeys(_mapping(stage, "fetchDict").values()))
    inner = [w for w in wanted if w not in {s.name for s in outputs}]
    if inner:
        # fetchDict names tensors inside the model: run the model cut so that exactly the
        # fetched tensors are its outputs, as the JVM stage does.
        from mmlspark.onnx._graph import cut

        try:
            model = cut(model, wanted)
        except ValueError as error:
            fail(
                f"fetchDict names {', '.join(inner)}, which are not outputs of the model ("
                + ", ".join(s.describe() for s in outputs)
                + f"): {error}"
            )
        inputs, outputs = model_specs(model)
    by_input = {s.name: s for s in inputs}
    by_output = {s.name: s for s in outputs}
    feed_dict = _mapping(stage, "feedDict")
    if feed_dict:
        for model_input in feed_dict:
            if model_input not in by_input:
                fail(
                    f"feedDict names model input '{model_input}', but the model's inputs are "
                    + ", ".join(s.describe() for s in inputs)
                )
        missing = [s.describe() for s in inputs if s.name not in feed_dict]
        if missing:
            fail(f"model inputs {', '.join(missing)} are not fed; add them to feedDict")
    else:
        only = _only(stage, "inputCol", "feedDict", inputs, "map each to a column with feedDict")
        feed_dict = {only.name: stage.getOrDefault("inputCol")}
    feeds = []
    for spec in inputs:
        column = feed_dict[spec.name]
        if spec.type not in {v[0] for v in _FEED_DTYPES.values()}:
            fail(f"model input {spec.describe()} is not a tensor ONNXModel can feed")
        if column not in schema.fieldNames():
            fail(
                f"input column '{column}' does not exist; available columns: "
                f"[{', '.join(schema.fieldNames())}]"
            )
        field = schema[column]
        source, _ = _source(field.dataType)
        ok = (
            source == "string"
            if spec.type == "string"
            else source in ("float", "int", "vector", "bool")
            if spec.type == "bool"
            else source in ("float", "int", "vector", "binary")
        )
        if not ok:
            fail(
                f"input column '{column}' has type {field.dataType.simpleString()}, which "
                f"model input {spec.describe()} cannot take"
            )
        template = spec.row_shape
        meta = field.metadata.get("tensorShape") if field.metadata else None
        if meta is not None and len(meta) == len(template):
            template = tuple(t if t >= 0 else int(m) for t, m in zip(template, meta, strict=True))
        dtype = next(v[1] for v in _FEED_DTYPES.values() if v[0] == spec.type)
        feeds.append(Feed(spec, column, source, template, dtype))
    fetch_dict = _mapping(stage, "fetchDict")
    if fetch_dict:
        for output in fetch_dict.values():
            if output not in by_output:
                fail(
                    f"fetchDict names model output '{output}', but the model's outputs are "
                    + ", ".join(s.describe() for s in outputs)
                )
    else:
        only = _only(stage, "outputCol", "fetchDict", outputs, "choose with fetchDict")
        fetch_dict = {stage.getOrDefault("outputCol"): only.name}
    fetches = tuple(Fetch(c, by_output[o]) for c, o in fetch_dict.items())
    for f in fetches:
        kinds = f.output.map_of or (f.output.type,)
        if not all(kind in _SPARK_TYPES for kind in kinds):
            fail(
                f"model output {f.output.describe()} is not a tensor or a sequence of maps; "
                "ONNXModel fetches those only"
            )
    fetched = {f.column: f for f in fetches}
    softmax, argmax = [], []
    for param in ("softMaxDict", "argMaxDict"):
        for column, new in _mapping(stage, param).items():
            if column not in fetched:
                fail(
                    f"{param} reads column '{column}', which is not fetched; fetched: "
                    f"{', '.join(fetched)}"
                )
            out = fetched[column].output
            if out.type not in ("float", "double", "float16") or not out.row_shape:
                fail(
                    f"{param} needs an array of floating-point values in '{column}', but it "
                    f"holds {out.describe()}"
                )
            if param == "softMaxDict":
                softmax.append(
                    (column, new, stage.getOrDefault("softMaxVectors") and len(out.row_shape) == 1)
                )
            else:
                argmax.append((column, new))
    added = [f.column for f in fetches] + [n for _, n, _ in softmax] + [n for _, n in argmax]
    added.append(stage.getOrDefault("errorCol"))
    for column in added:
        if column in schema.fieldNames():
            fail(f"output column '{column}' already exists")
    if len(set(added)) != len(added):
        repeated = next(c for c in added if added.count(c) > 1)
        fail(f"output columns must be distinct but repeat {repeated}")
    batched = all(f.input.shape and f.input.shape[0] == -1 for f in feeds)
    level = stage.getOrDefault("optimizationLevel")
    return Plan(
        model=model,
        digest=hashlib.sha256(model).hexdigest(),
        feeds=tuple(feeds),
        fetches=fetches,
        softmax=tuple(softmax),
        argmax=tuple(argmax),
        error_col=stage.getOrDefault("errorCol"),
        batch=stage.getOrDefault("miniBatchSize") if batched else 1,
        vectors=stage.getOrDefault("vectorOutputs"),
        device=stage.getOrDefault("deviceType"),
        settings=(level, stage.getOrDefault("intraOpThreads")),
    )


_SPARK_TYPES = {
    "float": "float",
    "float16": "float",
    "double": "double",
    "int8": "tinyint",
    "uint8": "int",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "bool": "boolean",
    "string": "string",
}


def _output_type(plan: Plan, fetch: Fetch) -> Any:
    from pyspark.sql import types as T

    if fetch.output.map_of is not None:
        key, value = (T._parse_datatype_string(_SPARK_TYPES[t]) for t in fetch.output.map_of)
        return T.MapType(key, value, valueContainsNull=False)
    element = T._parse_datatype_string(_SPARK_TYPES[fetch.output.type])
    if not fetch.output.row_shape:
        return element
    if plan.vectors and fetch.output.type in ("float", "double", "float16"):
        return T.ArrayType(T.DoubleType(), containsNull=False)  # made a vector after the UDF
    return T.ArrayType(element, containsNull=False)


def _providers(device: str) -> tuple[Any, ...]:
    import onnxruntime as ort  # type: ignore[import-untyped]
    from pyspark import TaskContext

    cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    context = TaskContext.get()
    gpus = context.resources().get("gpu") if context is not None else None
    if device == "cuda" and not cuda:
        raise RuntimeError(
            "deviceType is 'cuda' but this onnxruntime has no CUDA provider; install "
            "mmlspark[gpu] (onnxruntime-gpu) on the executors"
        )
    if device == "cuda" or (device == "auto" and cuda and gpus is not None):
        address = int(gpus.addresses[0]) if gpus is not None and gpus.addresses else 0
        return (("CUDAExecutionProvider", (("device_id", address),)), "CPUExecutionProvider")
    return ("CPUExecutionProvider",)


def _threads(requested: int) -> int:
    if requested > 0:
        return requested
    from pyspark import TaskContext

    context = TaskContext.get()
    return max(1, context.cpus()) if context is not None else 1


def _row_input(feed: Feed, value: Any) -> tuple[tuple[int, ...], np.ndarray]:
    """The row's values as the model input's dtype, and the shape they are fed as."""
    if value is None:
        raise RowError(f"input column '{feed.column}' is null")
    if feed.source == "vector":
        if value["type"] == 0:  # sparse
            dense = np.zeros(value["size"], dtype=np.float64)
            dense[np.asarray(value["indices"], dtype=np.int64)] = value["values"]
            values = dense.tolist()
        else:
            values = list(value["values"])
        shape: tuple[int, ...] = (len(values),)
        source = "float"
    elif isinstance(value, np.ndarray):  # a flat array column without null elements
        shape, values, source = (value.size,), value, feed.source
        resolved = resolve(feed.column, feed.input, feed.template, shape)
        return resolved, _to_dtype(values, source, feed.dtype).reshape(resolved)
    elif feed.source == "binary":
        data = bytes(value)
        shape, source = (len(data),), "binary"
        values = [data]
    else:
        shape = _nested_shape(value)
        values = _flat(value)
        source = feed.source
    for i, v in enumerate(values):
        if v is None:
            raise RowError(f"array element {i % shape[-1] if shape else i} is null")
    resolved = resolve(feed.column, feed.input, feed.template, shape)
    array = _to_dtype(values, source, feed.dtype)
    return resolved, array.reshape(resolved)


def _softmax_is_double(plan: Plan, column: str, as_vector: bool) -> bool:
    """A softmax column is a double vector, or has the fetched column's element type."""
    source = next(f for f in plan.fetches if f.column == column)
    return plan.vectors or as_vector or source.output.type == "double"


def _softmax(x: np.ndarray) -> np.ndarray:
    d = x.astype(np.float64)
    m = d.max() if d.size else 0.0
    e = np.exp(d - m)
    return e / e.sum()


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


def _partition(plan: Plan, batches: Iterator[Any]) -> Iterator[Any]:
    providers = _providers(plan.device)
    settings = (plan.settings[0], _threads(plan.settings[1]))
    session = _session(plan.model, plan.digest, providers, settings, plan.model_file)
    # Arrow hands up to spark.sql.execution.arrow.maxRecordsPerBatch (10,000) rows at once; only
    # one mini-batch of them is held as Python values, so large tensors do not fill the worker.
    step = max(plan.batch, 16)
    for arrow_batch in batches:
        for offset in range(0, arrow_batch.num_rows, step):
            yield _scored(plan, session, arrow_batch.slice(offset, step))


def _column_values(feed: Feed, column: Any) -> list[Any]:
    """The column's values per row: for a flat array of numbers without null elements, numpy
    views of the Arrow buffer (no Python object per element); otherwise Python values."""
    import pyarrow as pa  # type: ignore[import-untyped]

    kind = column.type
    flat_numbers = (
        feed.source in ("float", "int")
        and (pa.types.is_list(kind) or pa.types.is_large_list(kind))
        and (pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type))
    )
    if not flat_numbers or column.values.null_count:
        return column.to_pylist()  # type: ignore[no-any-return]
    values = column.values.to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [values[offsets[r] : offsets[r + 1]] if valid[r] else None for r in range(len(column))]


def _scored(plan: Plan, session: Any, batch: Any) -> Any:
    """The output rows of `batch`: its columns, then the stage's."""
    n = batch.num_rows
    columns = {f.column: _column_values(f, batch.column(f.column)) for f in plan.feeds}
    inputs: list[list[np.ndarray] | None] = [None] * n
    shapes: list[tuple[Any, ...] | None] = [None] * n
    errors: list[str | None] = [None] * n
    for r in range(n):
        try:
            row = [_row_input(f, columns[f.column][r]) for f in plan.feeds]
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
        double = _softmax_is_double(plan, column, as_vector)
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


def _arrow(plan: Plan, fetch: Fetch, values: list[Any]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    if fetch.output.map_of is not None:
        return _map_arrow(fetch.output.map_of, values)
    element = getattr(pa, _ARROW[fetch.output.type])()
    if not fetch.output.row_shape:
        return pa.array([None if v is None else v.item(0) for v in values], type=element)
    if plan.vectors and fetch.output.type in ("float", "double", "float16"):
        element = pa.float64()
    if fetch.output.type == "string":
        return pa.array([None if v is None else v.tolist() for v in values], type=pa.list_(element))
    # One Arrow list array from the rows' flat numpy arrays, without a Python value per element.
    lengths = np.array([0 if v is None else v.size for v in values], dtype=np.int64)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [v.reshape(-1) for v in values if v is not None]
    flat = np.concatenate(present) if present else np.zeros(0)
    mask = pa.array(np.array([v is None for v in values], dtype=bool))
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=element), mask=mask)


def _vector(column: Any) -> Any:
    """An array<double> column as ML vectors, null staying null (Spark's array_to_vector fails on
    a null)."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    return F.when(column.isNotNull(), array_to_vector(column))


# The models shipped, by (application or Connect session, file name).
_SHIPPED: set[tuple[str, str]] = set()


def _shipped(spark: Any, the_plan: Plan) -> Plan:
    """`the_plan` with its model shipped to the executors once (SparkContext.addFile on a classic
    session, a file artifact over Spark Connect) rather than carried by every task's UDF; the
    plan as it is where the session cannot ship files."""
    import dataclasses
    import logging
    import os
    import tempfile

    from pyspark.sql.utils import is_remote

    name = f"mmlspark-model-{the_plan.digest}.onnx"
    try:
        owner = spark.session_id if is_remote() else spark.sparkContext.applicationId
        if (owner, name) not in _SHIPPED:
            folder = os.path.join(tempfile.gettempdir(), f"mmlspark-models-{os.getpid()}")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                with open(path + ".part", "wb") as f:
                    f.write(the_plan.model)
                os.replace(path + ".part", path)
            if is_remote():
                spark.addArtifacts(path, file=True)
            else:
                spark.sparkContext.addFile(path)
            _SHIPPED.add((owner, name))
    except Exception as error:  # noqa: BLE001 (the UDF then carries the model)
        logging.getLogger("mmlspark").info("the model travels with the UDF: %s", error)
        return the_plan
    return dataclasses.replace(the_plan, model=b"", model_file=name)


def transform(stage: Any, model: bytes, dataset: Any) -> Any:
    """The stage's output for `dataset`, computed by onnxruntime in the Python workers."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from mmlspark.core.fused import Step, run_step

    the_plan = _shipped(dataset.sparkSession, plan(stage, model, dataset.schema))
    fields = []
    for fetch in the_plan.fetches:
        fields.append(T.StructField(fetch.column, _output_type(the_plan, fetch)))
    for column, new, as_vector in the_plan.softmax:
        double = _softmax_is_double(the_plan, column, as_vector)
        fields.append(
            T.StructField(new, T.ArrayType(T.DoubleType() if double else T.FloatType(), False))
        )
    for _, new in the_plan.argmax:
        fields.append(T.StructField(new, T.DoubleType()))
    fields.append(T.StructField(the_plan.error_col, T.StringType()))
    vectors = [
        fetch.column
        for fetch in the_plan.fetches
        if fetch.output.row_shape
        and the_plan.vectors
        and fetch.output.type in ("float", "double", "float16")
    ] + [new for _, new, as_vector in the_plan.softmax if as_vector or the_plan.vectors]

    def finish(out: Any) -> Any:
        for fetch in the_plan.fetches:
            fetched = F.col(f"`{fetch.column}`")
            if fetch.column in vectors:
                fetched = _vector(fetched)
            # withMetadata: Spark Connect's withColumn drops an alias's metadata (4.3)
            out = out.withColumn(fetch.column, fetched).withMetadata(
                fetch.column, {"tensorShape": list(fetch.output.row_shape)}
            )
        for _, new, _ in the_plan.softmax:
            if new in vectors:
                out = out.withColumn(new, _vector(F.col(f"`{new}`")))
        return out

    # The UDF carries this module's code with it (pickled by value), so the Python workers need
    # numpy, pyarrow and onnxruntime, but not mmlspark: a Connect server we do not control runs it.
    return run_step(
        dataset,
        Step(_partition, the_plan),
        fields,
        finish,
        [sys.modules[__name__]],
        ends_chain=bool(vectors),
    )
