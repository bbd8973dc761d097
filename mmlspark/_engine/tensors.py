"""Model inputs and outputs as ONNXModel sees them, and rows fed as tensors: the JVM stage's
type names, shape resolution (``Feed.scala``) and value casts, with its messages for a row that
cannot be fed."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError, list_views

# ONNX element type names as the JVM stage writes them -> numpy dtype of the fed array.
FEED_DTYPES = {
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
        return f"'{self.name}' ({self.type}{show(self.shape)})"


_SEQUENCE_OF_MAPS = re.compile(r"seq\(map\((\w+),\s*tensor\((\w+)\)\)\)")


def type_name(onnx_type: str) -> tuple[str, tuple[str, str] | None]:
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


def spec_of(arg: Any) -> Spec:
    name, map_of = type_name(arg.type)
    if map_of is not None:
        return Spec(arg.name, name, (), map_of)
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or []))
    return Spec(arg.name, name, shape)


def show(shape: Any) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _fits(shape: tuple[int, ...], template: tuple[int, ...]) -> bool:
    return len(shape) == len(template) and all(
        t < 0 or t == s for s, t in zip(shape, template, strict=True)
    )


def is_transposed(shape: tuple[int, ...], template: tuple[int, ...]) -> bool:
    """Whether `shape` does not fit `template` but a reordering of its dimensions does: a layout
    mix-up (CHW against HWC) that a reshape would hide (``Feed.isTransposed``)."""
    if not shape or len(shape) != len(template) or min(shape) < 0 or _fits(shape, template):
        return False
    from itertools import permutations

    return any(_fits(p, template) for p in permutations(shape))


def resolve(
    column: str, spec: Spec, template: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The shape a row of `shape` is fed as, for a model input of row shape `template` (the JVM
    stage's rules, Feed.scala)."""
    count = math.prod(shape)
    expected = math.prod(d for d in template if d >= 0)
    unknown = sum(1 for d in template if d < 0)
    if is_transposed(shape, template):
        raise RowError(
            row_message(
                "transposed",
                column=column,
                shape=show(shape),
                input=spec.describe(),
                template=show(template),
            )
        )

    def mismatch() -> RowError:  # made only for a row that fails (most rows fit)
        return RowError(
            row_message(
                "wrongCount",
                column=column,
                count=count,
                shape=show(shape),
                input=spec.describe(),
                template=show(template),
            )
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
            raise RowError(row_message("nullNested", index=i))
        shapes.append(_nested_shape(element))
    for i, s in enumerate(shapes[1:], start=1):
        if s != shapes[0]:
            raise RowError(row_message("ragged", first=show(shapes[0]), index=i, shape=show(s)))
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


def row_input(feed: Feed, value: Any) -> tuple[tuple[int, ...], np.ndarray]:
    """The row's values as the model input's dtype, and the shape they are fed as."""
    if value is None:
        raise RowError(row_message("nullInput", column=feed.column))
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
            raise RowError(row_message("nullElement", index=i % shape[-1] if shape else i))
    resolved = resolve(feed.column, feed.input, feed.template, shape)
    array = _to_dtype(values, source, feed.dtype)
    return resolved, array.reshape(resolved)


def column_values(feed: Feed, column: Any) -> list[Any]:
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
    return list_views(column)  # type: ignore[return-value]
