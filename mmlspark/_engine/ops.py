"""The image operations of ImageTransformer (the JVM's ``ImageOp``): their vocabulary, the JVM's
defaults and validation, and how each one changes an image, with the JVM's results and messages;
and images as the tensors a model takes."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmlspark._engine.files import MAX_PIXELS_KEY
from mmlspark._engine.java import java_double
from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError
from mmlspark._engine.structs import channels_of


@dataclass
class Image:
    """An image between operations, and the order of its channels (BGR, RGB or GRAY)."""

    pixels: np.ndarray
    order: str


@dataclass(frozen=True)
class Op:
    """One parsed operation: its name and arguments, with the JVM's defaults filled in, and its
    entry of the registry (the JVM's ``OpSpec``, as codegen writes it): its size flags and rules."""

    op: str
    args: dict[str, Any]
    entry: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.args[name]

    def fail(self, message: str) -> RowError:
        return RowError(f"{self.op}: {message}")

    def _size(self, key: str) -> tuple[int, int] | None:
        names = self.entry.get(key)
        return None if names is None else (int(self[names[0]]), int(self[names[1]]))

    @property
    def fixed_size(self) -> tuple[int, int] | None:
        """The output size when it does not depend on the input: (height, width)."""
        return self._size("fixedSize")

    @property
    def changes_size(self) -> bool:
        return bool(self.entry.get("changesSize"))

    @property
    def min_input_size(self) -> tuple[int, int] | None:
        """The least input size (height, width) of a smaller decode that still serves it."""
        return self._size("minInputSize")

    @property
    def pixelwise(self) -> bool:
        return bool(self.entry.get("pixelwise"))

    def resolved(self, name: str) -> str:
        """Our spelling of the value of `name`, a field with a spelling rule (colorFormat's
        format), which validation has checked."""
        spelling = next(r["spelling"] for r in self.entry["rules"] if name in r["fields"])
        return str(spelling[str(self[name]).strip().lower()])


_PLACEHOLDER = re.compile(r"\{(\w+)(\.length)?\}")


def _shown(value: Any, kind: str) -> str:
    """`value` of a field of type `kind` as the JVM prints it."""
    if kind == "float":
        return java_double(float(value))
    if kind == "int" and not isinstance(value, bool):
        return str(int(value))
    return str(value)


def _holds(kind: str, values: list[Any], shown: list[str], choices: Sequence[str]) -> bool:
    """Whether `values` keep a rule of `kind` (the JVM's ``RuleKind``)."""
    if kind == "positive":
        return all(v > 0 for v in values)
    if kind == "atLeastZero":
        return all(v >= 0 for v in values)
    if kind == "oddPositive":
        return all(v > 0 and v % 2 == 1 for v in values)
    if kind == "oneOf":
        return all(s in choices for s in shown)
    if kind == "spelling":
        return all(str(v).strip().lower() in choices for v in values)
    if kind == "sameNonEmptyLength":
        first, second = values
        return len(first) > 0 and len(first) == len(second)
    if kind == "noZero":
        return all(x != 0.0 for v in values for x in v)
    raise ValueError(f"unknown kind of image operation rule '{kind}'")


def _validate(op: Op) -> None:
    """The registry's rules of `op`, in order: the first it breaks fails it with its message."""
    types = op.entry["types"]
    for rule in op.entry["rules"]:
        values = [op[f] for f in rule["fields"]]
        shown = [_shown(op[f], types[f]) for f in rule["fields"]]
        if not _holds(rule["kind"], values, shown, rule["choices"]):

            def fill(m: re.Match[str]) -> str:
                value = op[m.group(1)]
                return str(len(value)) if m.group(2) else _shown(value, types[m.group(1)])

            raise ValueError(f"{op.op}: {_PLACEHOLDER.sub(fill, rule['message'])}")


def parse_ops(text: str, registry: Mapping[str, Mapping[str, Any]]) -> list[Op]:
    """The operations of an ``operations`` JSON value, validated as the JVM validates them.
    `registry` is the image operation registry codegen writes from the JVM's (``OPERATIONS`` of
    ``mmlspark.opencv._ImageOps``: each operation's fields in order and their defaults); the
    driver passes it, as the engine imports nothing from the rest of mmlspark."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"image operations are not JSON ({error}): {text}") from None
    if not isinstance(parsed, list):
        raise ValueError(f"image operations must be a JSON array but were {text}")
    ops = []
    for item in parsed:
        shown = json.dumps(item, separators=(",", ":"))
        if not isinstance(item, dict) or "op" not in item:
            raise ValueError(f"image operation without 'op': {shown}")
        name = item["op"]
        if name not in registry:
            raise ValueError(f"unknown image operation '{name}'; known: {', '.join(registry)}")
        args = {}
        defaults = registry[name]["defaults"]
        for arg in registry[name]["fields"]:
            value = item.get(arg, defaults.get(arg))
            if value is None:
                raise ValueError(f"image operation {shown}: no value for '{arg}'")
            args[arg] = value
        op = Op(name, args, registry[name])
        _validate(op)
        ops.append(op)
    return ops


def reduced_decode_target(ops: Sequence[Op]) -> tuple[int, int] | None:
    """The size a decode must at least have to serve `ops` (see the JVM's twin)."""
    for op in ops:
        if not op.pixelwise:
            return op.min_input_size
    return None


def _resize(image: Image, width: int, height: int, interpolation: int) -> Image:
    import cv2

    return Image(
        cv2.resize(image.pixels, (width, height), interpolation=interpolation), image.order
    )


def _crop(image: Image, op: Op, x: int, y: int, height: int, width: int) -> Image:
    h, w = image.pixels.shape[:2]
    if x + width > w or y + height > h:
        raise op.fail(
            row_message(
                "opOutside", x=x, y=y, height=height, width=width, imageHeight=h, imageWidth=w
            )
        )
    return Image(image.pixels[y : y + height, x : x + width].copy(), image.order)


def _convert(image: Image, op: Op, target: str) -> Image:
    import cv2

    channels = channels_of(image.pixels)
    source = image.order
    code: str | None
    if (channels == 3 and source == target) or (source, channels, target) == ("GRAY", 1, "GRAY"):
        code = None
    else:
        code = {
            ("BGR", 3, "RGB"): "COLOR_BGR2RGB",
            ("RGB", 3, "BGR"): "COLOR_BGR2RGB",
            ("BGR", 3, "GRAY"): "COLOR_BGR2GRAY",
            ("RGB", 3, "GRAY"): "COLOR_RGB2GRAY",
            ("BGR", 4, "BGR"): "COLOR_BGRA2BGR",
            ("RGB", 4, "RGB"): "COLOR_BGRA2BGR",
            ("BGR", 4, "RGB"): "COLOR_BGRA2RGB",
            ("RGB", 4, "BGR"): "COLOR_BGRA2RGB",
            ("BGR", 4, "GRAY"): "COLOR_BGRA2GRAY",
            ("RGB", 4, "GRAY"): "COLOR_RGBA2GRAY",
            ("GRAY", 1, "BGR"): "COLOR_GRAY2BGR",
            ("GRAY", 1, "RGB"): "COLOR_GRAY2RGB",
        }.get((source, channels, target))
        if code is None:
            raise op.fail(
                row_message("opCannotConvert", channels=channels, to=target, **{"from": source})
            )
    if code is None:
        return Image(image.pixels.copy(), target)
    return Image(cv2.cvtColor(image.pixels, getattr(cv2, code)), target)


def _normalize(image: Image, op: Op) -> Image:
    pixels = image.pixels
    channels = channels_of(pixels)
    color = 3 if channels == 4 else channels
    mean, std = list(op["mean"]), list(op["std"])
    if len(mean) not in (1, color):
        raise op.fail(row_message("opMeansCount", means=len(mean), channels=color))

    def per_channel(values: list[float]) -> list[float]:
        full = values * color if len(values) == 1 else values
        return list(reversed(full)) if image.order == "BGR" else full

    m, s = per_channel(mean), per_channel(std)
    out = pixels.astype(np.float32)
    planes = out.reshape(out.shape[0], out.shape[1], channels)
    scale = np.float32(op["colorScaleFactor"])
    for c in range(color):
        planes[..., c] = (planes[..., c] * scale - np.float32(m[c])) / np.float32(s[c])
    return Image(out, image.order)


def _letterbox(image: Image, op: Op) -> Image:
    import cv2

    size, pad = int(op["size"]), float(op["padValue"])
    height, width = image.pixels.shape[:2]
    if height <= 0 or width <= 0:
        raise RowError(
            "requirement failed: " + row_message("letterboxEmpty", width=width, height=height)
        )
    scale = min(size / height, size / width)
    scaled_h, scaled_w = max(1, round(height * scale)), max(1, round(width * scale))
    top, left = (size - scaled_h) // 2, (size - scaled_w) // 2
    scaled = image.pixels
    if (scaled_h, scaled_w) != (height, width):
        scaled = cv2.resize(scaled, (scaled_w, scaled_h), interpolation=cv2.INTER_LINEAR)
    out = cv2.copyMakeBorder(
        scaled,
        top,
        size - scaled_h - top,
        left,
        size - scaled_w - left,
        cv2.BORDER_CONSTANT,
        value=(pad, pad, pad, pad),
    )
    return Image(out, image.order)


def apply(op: Op, image: Image) -> Image:
    """`op` applied to `image`: a new image."""
    import cv2

    name, pixels = op.op, image.pixels
    if name == "resize":
        return _resize(image, int(op["width"]), int(op["height"]), int(op["interpolation"]))
    if name == "resizeShorter":
        h, w = pixels.shape[:2]
        size = int(op["size"])
        scale = size / min(h, w)
        nh, nw = (
            (size, math.floor(w * scale + 0.5)) if h <= w else (math.floor(h * scale + 0.5), size)
        )
        return _resize(image, nw, nh, int(op["interpolation"]))
    if name == "crop":
        return _crop(image, op, int(op["x"]), int(op["y"]), int(op["height"]), int(op["width"]))
    if name == "centerCrop":
        h, w = pixels.shape[:2]
        height, width = int(op["height"]), int(op["width"])
        if height > h or width > w:
            raise op.fail(
                row_message("opLarger", height=height, width=width, imageHeight=h, imageWidth=w)
            )
        return _crop(image, op, (w - width) // 2, (h - height) // 2, height, width)
    if name == "colorFormat":
        return _convert(image, op, op.resolved("format"))
    if name == "flip":
        return Image(cv2.flip(pixels, int(op["flipCode"])), image.order)
    if name == "blur":
        return Image(cv2.blur(pixels, (int(op["width"]), int(op["height"]))), image.order)
    if name == "threshold":
        _, out = cv2.threshold(
            pixels, float(op["threshold"]), float(op["maxVal"]), int(op["thresholdType"])
        )
        return Image(out, image.order)
    if name == "gaussianKernel":
        k = int(op["apertureSize"])
        return Image(cv2.GaussianBlur(pixels, (k, k), float(op["sigma"])), image.order)
    if name == "normalize":
        return _normalize(image, op)
    if name == "letterbox":
        return _letterbox(image, op)
    raise ValueError(f"unknown image operation '{name}'")


def run_ops(ops: Sequence[Op], image: Image, limit: int) -> Image:
    """`ops` applied in order; an output over `limit` pixels fails the row, as on the JVM."""

    def refuse(op: Op, height: int, width: int) -> RowError:
        return RowError(
            row_message(
                "opOverLimit",
                op=op.op,
                width=width,
                height=height,
                pixels=height * width,
                limit=limit,
                key=MAX_PIXELS_KEY,
            )
        )

    for op in ops:
        fixed = op.fixed_size
        if fixed is not None and fixed[0] * fixed[1] > limit:
            raise refuse(op, *fixed)
        image = apply(op, image)
        height, width = image.pixels.shape[:2]
        if height * width > limit:
            raise refuse(op, height, width)
    return image


def to_chw(image: Image, order: str) -> np.ndarray:
    """The pixels as a flat float32 CHW array, channels in `order` (RGB, BGR or GRAY)."""
    channels = channels_of(image.pixels)
    same = (image.order, channels, order) in (
        ("GRAY", 1, "GRAY"),
        ("BGR", 3, "BGR"),
        ("RGB", 3, "RGB"),
    )
    swapped = (image.order, channels, order) in (("BGR", 3, "RGB"), ("RGB", 3, "BGR"))
    if not same and not swapped:
        image = _convert(image, Op("colorFormat", {"format": order}), order)
    pixels = image.pixels
    planes = pixels.reshape(pixels.shape[0], pixels.shape[1], -1)
    if swapped:
        planes = planes[..., ::-1]
    return np.ascontiguousarray(planes.transpose(2, 0, 1), dtype=np.float32).reshape(-1)


def gray_tensor(ops: Sequence[Op]) -> bool:
    """Whether the tensor has one channel: the last color conversion is to GRAY."""
    targets = [op.resolved("format") for op in ops if op.op == "colorFormat"]
    return bool(targets) and targets[-1] == "GRAY"


def tensor_shape(ops: Sequence[Op]) -> list[int]:
    """``[C, H, W]`` of the tensor output, -1 where it depends on the input."""
    size: tuple[int, int] | None = None
    for op in ops:
        if op.changes_size:
            size = op.fixed_size
    channels = 1 if gray_tensor(ops) else 3
    return [channels, size[0] if size else -1, size[1] if size else -1]
