"""The image stages on the Python backend: OpenCV (opencv-python) in Arrow UDFs, no jar.

The row semantics are the JVM stages' (``scala/.../pixels`` and ``scala/.../opencv``): the same
header checks before decoding, EXIF orientation, reduced JPEG decodes, pixel limit, operations,
tensor layout and ``errorCol`` messages, so that with the same OpenCV version both backends give
the same bytes. The module imports nothing from mmlspark but its twin readers
(``mmlspark.image._headers``), and both travel to the Python workers by value.

What the Python backend does not do: where a stage needs only a smaller image, the JVM decodes a
PNG, TIFF, BMP or GIF over the pixel limit keeping every n-th pixel of every n-th row as it reads
(Java's image readers); OpenCV's Python API decodes such a file only whole, so the Python backend
refuses it with that reason, as it refuses any image over the limit.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from mmlspark.image._headers import (
    ImageHeader,
    exif_orientation,
    exif_seconds,
    has_jpeg_end,
    hex_prefix,
    is_jpeg,
    jpeg_data_shortfall,
    read_header,
)

MAX_PIXELS_KEY = "spark.mmlspark.image.maxPixels"
MAX_FILE_BYTES_KEY = "spark.mmlspark.image.maxFileBytes"
COLOR_MODES = ("color", "grayscale", "unchanged")
# Heap bytes the JVM side assumes per decoded pixel (ImageLimits.BytesPerPixel); the Python
# workers take the same share of the machine's memory per core.
_BYTES_PER_PIXEL = 30
_ROWS_PER_SLICE = 16
_OUT_ROWS, _OUT_BYTES = 64, 64 << 20


class RowError(ValueError):
    """A row the stage cannot compute; its message is the row's error, as the JVM gives a rejected
    input's (IllegalArgumentException) message."""


def _describe(error: BaseException) -> str:
    if isinstance(error, RowError):
        return str(error)
    if isinstance(error, MemoryError):
        return (
            f"out of memory on this executor ({error}); the row was skipped and its memory "
            "released. Lower the image or batch size, or give the executors more memory"
        )
    return f"{type(error).__name__}: {error}"


def megapixels(pixels: int) -> str:
    """``12.3 MP``, rounded half up as Java's ``%.1f`` rounds."""
    return f"{Decimal(repr(pixels / 1e6)).quantize(Decimal('0.1'), ROUND_HALF_UP)} MP"


def max_pixels(setting: str | None) -> int:
    """Decoded pixels one image may have: the setting, else each core's share of 60% of this
    machine's memory at the JVM side's bytes per pixel."""
    if setting is not None:
        return _positive_setting(MAX_PIXELS_KEY, setting)
    return int(_slot_budget() / _BYTES_PER_PIXEL)


def _positive_setting(key: str, setting: str) -> int:
    try:
        value = int(setting.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{key} must be a positive whole number, not '{setting}'")
    return value


#: Where the kernel shows this process's control group (its memory and CPU limits).
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_value(*names: str) -> str | None:
    """The first of the cgroup files `names` (v2, then v1) that can be read, stripped."""
    for name in names:
        try:
            return (CGROUP_ROOT / name).read_text().strip()
        except OSError:
            continue
    return None


def _memory_limit() -> int:
    """Bytes this process may use: the machine's memory, or its cgroup's limit where lower (a
    container on a large host)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = _cgroup_value("memory.max", "memory/memory.limit_in_bytes")
    if limit and limit.isdigit():
        memory = min(memory, int(limit))
    return memory


def _cpus() -> int:
    """The cores this process may run on: its CPU affinity, or its cgroup's CPU quota where
    lower."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cgroup_value("cpu.max")
    if quota and quota.split()[0].isdigit():
        share, period = quota.split()[:2]
        cpus = min(cpus or 1, max(1, -(-int(share) // int(period))))
    else:
        v1 = _cgroup_value("cpu/cpu.cfs_quota_us"), _cgroup_value("cpu/cpu.cfs_period_us")
        if v1[0] and v1[1] and v1[0].isdigit() and v1[1].isdigit():
            cpus = min(cpus or 1, max(1, -(-int(v1[0]) // int(v1[1]))))
    return max(1, cpus or 1)


def _slot_budget() -> float:
    """Bytes one task's Python worker may take: 60% of its share of the memory it really has.
    Under ``spark.executor.pyspark.memory`` Spark gives each worker its share
    (``PYSPARK_EXECUTOR_MEMORY_MB``); else the process's memory (the cgroup's limit in a
    container) is shared by the cores it may use, as the JVM shares its heap by task slots."""
    worker_mb = os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "")
    if worker_mb.isdigit() and int(worker_mb) > 0:
        return int(worker_mb) * 2**20 * 0.6
    return _memory_limit() * 0.6 / _cpus()


def max_file_bytes(setting: str | None) -> int:
    """Bytes one encoded file may have: the setting, else a quarter of a core's share (the JVM's
    ``ImageLimits.maxFileBytes``)."""
    if setting is not None:
        return _positive_setting(MAX_FILE_BYTES_KEY, setting)
    return min(int(_slot_budget() / 4), 2**31 - 17)


def megabytes(size: int) -> str:
    return f"{Decimal(repr(size / 1048576)).quantize(Decimal('0.1'), ROUND_HALF_UP)} MB"


#: Where Databricks mounts its filesystems for local processes.
MOUNTS = {"dbfs:/Volumes/": "/Volumes/", "dbfs:/": "/dbfs/"}


def local_file(path: str) -> str:
    """The local path of a file that Spark names `path` (``file:`` URIs, and the ``dbfs:`` paths
    that Databricks mounts at ``/Volumes`` and ``/dbfs``); other filesystems are refused as a
    row error. Spark's file sources give percent-encoded URIs: a name is decoded when the raw one
    does not exist."""
    from urllib.parse import unquote

    if path.startswith("file:"):
        local = path[len("file:") :]
        if local.startswith("//"):
            host, slash, rest = local[2:].partition("/")
            if host not in ("", "localhost"):
                raise RowError(f"cannot read the file: it is on host {host}, not this machine")
            local = slash + rest
    else:
        local = next((m + path[len(p) :] for p, m in MOUNTS.items() if path.startswith(p)), "")
        if not local:
            scheme = path.split(":", 1)[0] if ":" in path.split("/", 1)[0] else ""
            if scheme:
                raise RowError(
                    f"cannot read the file: the Python backend reads local and mounted paths "
                    f"(file:, /dbfs, /Volumes), not {scheme}: paths; mount the storage, or read "
                    "it with the jar's backend"
                )
            local = path
    if "%" in local and not os.path.lexists(local):
        local = unquote(local)
    return local


def _reason(error: OSError) -> str:
    """An OSError as ``ImageFiles.reason`` words the JVM's."""
    import errno

    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ENOENT:
        return "no such file (removed while reading?)"
    if error.errno == errno.EISDIR:
        return "is a folder"
    return error.strerror or type(error).__name__


def read_file(path: str, limit: int, head: int | None = None) -> bytes:
    """The bytes of the file Spark names `path` (the first `head` bytes only, when given),
    refused before reading when over `limit` bytes (the JVM's ``ImageFiles.readBytes``)."""
    local = local_file(path)
    try:
        with open(local, "rb") as f:
            if head is not None:
                return f.read(head)
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise RowError(
                    f"file is {megabytes(size)}, over the limit of {megabytes(limit)} per file "
                    f"on this executor; raise {MAX_FILE_BYTES_KEY}"
                )
            return f.read()
    except OSError as error:
        raise RowError(f"cannot read the file: {_reason(error)}") from None


# ---------------------------------------------------------------------------------------------
# Decoding (ImageCodec)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _imread_flags(cv2: Any, mode: str, factor: int) -> int:
    if mode == "unchanged":
        return int(cv2.IMREAD_UNCHANGED)
    names = {
        ("color", 1): "IMREAD_COLOR",
        ("color", 2): "IMREAD_REDUCED_COLOR_2",
        ("color", 4): "IMREAD_REDUCED_COLOR_4",
        ("color", 8): "IMREAD_REDUCED_COLOR_8",
        ("grayscale", 1): "IMREAD_GRAYSCALE",
        ("grayscale", 2): "IMREAD_REDUCED_GRAYSCALE_2",
        ("grayscale", 4): "IMREAD_REDUCED_GRAYSCALE_4",
        ("grayscale", 8): "IMREAD_REDUCED_GRAYSCALE_8",
    }
    name = names.get((mode, factor))
    if name is None:
        raise ValueError(f"unsupported decode options ({mode},{factor})")
    # Orientation is applied after, from our own EXIF reading, so that all modes agree.
    return int(getattr(cv2, name)) | int(cv2.IMREAD_IGNORE_ORIENTATION)


def _decode_factor(
    header: ImageHeader | None, mode: str, orientation: int, reduce: int, min_h: int, min_w: int
) -> tuple[int, bool]:
    """The scale to decode at, and whether the codec scales (JPEG's DCT scaling)."""
    wanted = min_h > 0 or min_w > 0
    scaled = header is not None and header.scalable and mode != "unchanged"
    if header is not None and scaled and wanted:
        width, height = (
            (header.height, header.width) if orientation >= 5 else (header.width, header.height)
        )
        for f in (8, 4, 2):
            if _ceil_div(width, f) >= min_w and _ceil_div(height, f) >= min_h:
                return f, scaled
        return 1, scaled
    return (1 if wanted else reduce), scaled


def _subsampled_on_jvm(header: ImageHeader, mode: str, min_h: int, min_w: int, limit: int) -> bool:
    """Whether the JVM reads this image, over the limit, keeping every n-th pixel of every n-th
    row (Java's image readers; ``SubsampledDecode``), which OpenCV's Python API cannot do."""
    if not (min_h > 0 or min_w > 0) or mode == "unchanged":
        return False
    if header.format not in _SUBSAMPLED_FORMATS:
        return False

    def fits(s: int) -> bool:
        return _ceil_div(header.width, s) >= min_w and _ceil_div(header.height, s) >= min_h

    step = 1
    while fits(step + 1) and step + 1 <= max(header.width, header.height):
        step += 1
    pixels = _ceil_div(header.width, step) * _ceil_div(header.height, step)
    return step > 1 and pixels <= limit


#: Formats the JVM reads subsampled (``SubsampledDecode.Formats``).
_SUBSAMPLED_FORMATS = ("png", "tiff", "bmp", "gif")


def _smaller(header: ImageHeader) -> str:
    """How an image over the limit can be decoded smaller, by what its format allows (the JVM's
    ``ImageCodec.smaller``)."""
    if header.scalable:
        return (
            "decode it smaller (reduceFactor, or minHeight and minWidth where the image is "
            "resized after), "
        )
    if header.format in _SUBSAMPLED_FORMATS:
        return (
            "decode it smaller (minHeight and minWidth where the image is resized after: a "
            f"{header.format.upper()} is then read subsampled; reduceFactor cannot shrink it as "
            "it is read), "
        )
    return ""


def decode(
    data: bytes | None,
    mode: str,
    apply_orientation: bool,
    reduce: int,
    min_h: int,
    min_w: int,
    limit: int,
) -> np.ndarray:
    """Decodes encoded image bytes like the JVM's ``ImageCodec.decode``: refused from the header
    when over ``limit`` pixels, at the smallest JPEG scale covering ``min_h`` x ``min_w`` when
    either is positive (else at 1/``reduce``), EXIF orientation applied."""
    import cv2

    if data is None:
        raise RowError("no data (null)")
    if len(data) == 0:
        raise RowError("empty file (0 bytes)")
    jpeg = is_jpeg(data)
    if jpeg and not has_jpeg_end(data):
        raise RowError(f"truncated JPEG: no end-of-image marker in {len(data)} bytes")
    orientation = exif_orientation(data) if apply_orientation and jpeg else 1
    header = read_header(data)
    factor, scaled = _decode_factor(header, mode, orientation, reduce, min_h, min_w)
    if header is not None:
        decoded_pixels = (
            _ceil_div(header.width, factor) * _ceil_div(header.height, factor)
            if scaled
            else header.pixels
        )
        if decoded_pixels > limit and _subsampled_on_jvm(header, mode, min_h, min_w, limit):
            raise RowError(
                f"image is {header.width}x{header.height} ({megapixels(header.pixels)}), over the "
                f"limit of {megapixels(limit)} per image on this executor; the Python backend "
                f"decodes a {header.format.upper()} whole (the JVM backend reads it subsampled "
                f"to {min_h}x{min_w}): give the executors more memory, or raise {MAX_PIXELS_KEY}"
            )
        if decoded_pixels > limit:
            at_scale = (
                f" ({megapixels(decoded_pixels)} at 1/{factor} scale)"
                if scaled and factor > 1
                else ""
            )
            raise RowError(
                f"image is {header.width}x{header.height} ({megapixels(header.pixels)})"
                f"{at_scale}, over the limit of {megapixels(limit)} per image on this executor; "
                f"{_smaller(header)}give the executors more memory, or raise {MAX_PIXELS_KEY}"
            )
    # After the limit: a header over it is refused as such, whatever follows it.
    short = jpeg_data_shortfall(data) if jpeg else None
    if short is not None:
        have, need, blocks = short
        raise RowError(
            f"corrupt JPEG: {have} bytes of image data for a frame of {blocks} 8x8 blocks, which "
            f"takes at least {need}; the file is damaged (its image data is missing)"
        )
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), _imread_flags(cv2, mode, factor))
    if decoded is None or decoded.size == 0:
        raise RowError(
            f"not a decodable image ({len(data)} bytes starting {hex_prefix(data)}): "
            "unknown format or corrupt data"
        )
    if header is None and decoded.shape[0] * decoded.shape[1] > limit:
        height, width = decoded.shape[:2]
        raise RowError(
            f"image is {width}x{height} ({megapixels(width * height)}), over the limit of "
            f"{megapixels(limit)} per image on this executor; raise {MAX_PIXELS_KEY}"
        )
    if mode == "unchanged" and factor > 1:
        size = (math.ceil(decoded.shape[1] / factor), math.ceil(decoded.shape[0] / factor))
        decoded = cv2.resize(decoded, size, interpolation=cv2.INTER_AREA)
    return orient(decoded, orientation)


def orient(image: np.ndarray, orientation: int) -> np.ndarray:
    """Applies an EXIF orientation (1-8) the way OpenCV's own reader does."""
    import cv2

    if orientation in (2, 3, 4):
        return cv2.flip(image, {2: 1, 3: -1, 4: 0}[orientation])
    if orientation in (5, 6, 7, 8):
        transposed = cv2.transpose(image)
        if orientation == 5:
            return transposed
        return cv2.flip(transposed, {6: 1, 7: -1, 8: 0}[orientation])
    return image


# ---------------------------------------------------------------------------------------------
# Image structs (ImageSchemaUtils)

_DEPTHS = {
    np.dtype(np.uint8): 0,
    np.dtype(np.int8): 1,
    np.dtype(np.uint16): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.float32): 5,
    np.dtype(np.float64): 6,
}
_DEPTH_NAMES = ("8U", "8S", "16U", "16S", "32S", "32F", "64F", "16F")
_READABLE = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 5: np.float32}


def channels_of(image: np.ndarray) -> int:
    return 1 if image.ndim == 2 else int(image.shape[2])


def order_of(image: np.ndarray) -> str:
    """The channel order of a decoded or struct image: GRAY for one channel, else BGR(A)."""
    return "GRAY" if channels_of(image) == 1 else "BGR"


def mode_of(image: np.ndarray) -> int:
    """The OpenCV type code of `image` (CV_8UC3 = 16, ...)."""
    return _DEPTHS[image.dtype] + (channels_of(image) - 1) * 8


def to_struct(image: np.ndarray, origin: str | None) -> tuple[Any, ...]:
    """The fields of Spark's image struct for `image`: samples little-endian, row-major."""
    data = np.ascontiguousarray(image, dtype=image.dtype.newbyteorder("<")).tobytes()
    return (
        origin,
        int(image.shape[0]),
        int(image.shape[1]),
        channels_of(image),
        mode_of(image),
        data,
    )


def from_struct(row: dict[str, Any] | None) -> np.ndarray:
    """The pixels of an image struct, checked as the JVM's ``ImageSchemaUtils.toMat`` checks."""
    if row is None:
        raise RowError("no input image (null)")
    height, width, mode, data = row["height"], row["width"], row["mode"], row["data"]
    depth, channels = mode & 7, (mode >> 3) + 1
    if depth not in _READABLE:
        raise RowError(f"unsupported image mode {mode} (CV_{_DEPTH_NAMES[depth]}C{channels})")
    dtype = np.dtype(_READABLE[depth]).newbyteorder("<")
    expected = height * width * channels * dtype.itemsize
    if data is None or len(data) != expected:
        found = "no" if data is None else len(data)
        raise RowError(f"requirement failed: image data has {found} bytes, expected {expected}")
    pixels = np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return pixels.reshape(shape)


# ---------------------------------------------------------------------------------------------
# Operations (ImageOp)

_INTERPOLATIONS = {
    0: "INTER_NEAREST",
    1: "INTER_LINEAR",
    2: "INTER_CUBIC",
    3: "INTER_AREA",
    4: "INTER_LANCZOS4",
}
_THRESHOLDS = {
    0: "THRESH_BINARY",
    1: "THRESH_BINARY_INV",
    2: "THRESH_TRUNC",
    3: "THRESH_TOZERO",
    4: "THRESH_TOZERO_INV",
}
# ColorFormat's targets: our spellings (any case) and the OpenCV COLOR_* codes from BGR(A) that
# give them, written as numbers.
_COLOR_TARGETS = {
    "rgb": "RGB",
    "bgr": "BGR",
    "gray": "GRAY",
    "4": "RGB",
    "3": "RGB",
    "6": "GRAY",
    "10": "GRAY",
    "1": "BGR",
    "8": "BGR",
}


@dataclass
class Image:
    """An image between operations, and the order of its channels (BGR, RGB or GRAY)."""

    pixels: np.ndarray
    order: str


def color_target(value: Any) -> str | None:
    return _COLOR_TARGETS.get(str(value).strip().lower()) if value is not None else None


@dataclass(frozen=True)
class Op:
    """One parsed operation: its name and arguments, with the JVM's defaults filled in."""

    op: str
    args: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.args[name]

    def fail(self, message: str) -> RowError:
        return RowError(f"{self.op}: {message}")

    @property
    def fixed_size(self) -> tuple[int, int] | None:
        if self.op in ("resize", "crop", "centerCrop"):
            return int(self["height"]), int(self["width"])
        if self.op == "letterbox":
            return int(self["size"]), int(self["size"])
        return None

    @property
    def changes_size(self) -> bool:
        return self.op in ("resize", "resizeShorter", "crop", "centerCrop", "letterbox")

    @property
    def min_input_size(self) -> tuple[int, int] | None:
        if self.op == "resizeShorter":
            return int(self["size"]), int(self["size"])
        if self.op in ("resize", "letterbox"):
            return self.fixed_size
        return None

    @property
    def pixelwise(self) -> bool:
        return self.op in ("colorFormat", "flip", "threshold", "normalize")


# The arguments of each operation, in order, with the defaults the JVM's case classes have.
_ARGS: dict[str, list[tuple[str, Any]]] = {
    "resize": [("height", None), ("width", None), ("interpolation", 1)],
    "resizeShorter": [("size", None), ("interpolation", 1)],
    "crop": [("x", None), ("y", None), ("height", None), ("width", None)],
    "centerCrop": [("height", None), ("width", None)],
    "colorFormat": [("format", None)],
    "flip": [("flipCode", 1)],
    "blur": [("height", None), ("width", None)],
    "threshold": [("threshold", None), ("maxVal", None), ("thresholdType", None)],
    "gaussianKernel": [("apertureSize", None), ("sigma", None)],
    "normalize": [("mean", None), ("std", None), ("colorScaleFactor", 1.0)],
    "letterbox": [("size", None), ("padValue", 114.0)],
}


def _validate(op: Op) -> None:
    """The JVM's ``validate()`` of each operation: arguments that can never work."""

    def require(condition: bool, message: str) -> None:
        if not condition:
            raise ValueError(f"{op.op}: {message}")

    def one_of(constants: dict[int, str], field: str, kind: str) -> None:
        value = op[field]
        low, high = min(constants), max(constants)
        require(value in constants, f"{field} must be {kind} {low}-{high} but was {value}")

    name = op.op
    if name in ("resize", "crop", "centerCrop", "blur"):
        h, w = op["height"], op["width"]
        require(h > 0 and w > 0, f"height and width must be positive but were {h} x {w}")
    if name in ("resize", "resizeShorter"):
        one_of(_INTERPOLATIONS, "interpolation", "an OpenCV INTER_* interpolation")
    if name in ("resizeShorter", "letterbox"):
        require(op["size"] > 0, f"size must be positive but was {op['size']}")
    if name == "crop":
        require(
            op["x"] >= 0 and op["y"] >= 0,
            f"x and y must be at least 0 but were ({op['x']}, {op['y']})",
        )
    if name == "colorFormat":
        require(
            color_target(op["format"]) is not None,
            "format must be one of 'RGB', 'BGR', 'GRAY' (any case; also '1', '10', '3', '4', "
            f"'6', '8') but was '{op['format']}'",
        )
    if name == "flip":
        require(
            op["flipCode"] in (-1, 0, 1), f"flipCode must be -1, 0 or 1 but was {op['flipCode']}"
        )
    if name == "threshold":
        one_of(_THRESHOLDS, "thresholdType", "an OpenCV THRESH_* type")
    if name == "gaussianKernel":
        size, sigma = op["apertureSize"], op["sigma"]
        require(size > 0 and size % 2 == 1, f"apertureSize must be odd and positive but was {size}")
        require(sigma >= 0, f"sigma must be at least 0 but was {float(sigma)}")
    if name == "normalize":
        mean, std = op["mean"], op["std"]
        require(
            len(mean) > 0 and len(mean) == len(std),
            f"mean and std must have the same, non-zero length but had {len(mean)} and {len(std)}",
        )
        require(all(s != 0.0 for s in std), "std must not contain 0")


def parse_ops(text: str) -> list[Op]:
    """The operations of an ``operations`` JSON value, validated as the JVM validates them."""
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
        if name not in _ARGS:
            raise ValueError(f"unknown image operation '{name}'; known: {', '.join(_ARGS)}")
        args = {}
        for arg, default in _ARGS[name]:
            value = item.get(arg, default)
            if value is None:
                raise ValueError(f"image operation {shown}: no value for '{arg}'")
            args[arg] = value
        op = Op(name, args)
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
        raise op.fail(f"region x={x} y={y} {height}x{width} lies outside the {h}x{w} image")
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
            raise op.fail(f"cannot convert a {channels}-channel {source} image to {target}")
    if code is None:
        return Image(image.pixels.copy(), target)
    return Image(cv2.cvtColor(image.pixels, getattr(cv2, code)), target)


def _normalize(image: Image, op: Op) -> Image:
    pixels = image.pixels
    channels = channels_of(pixels)
    color = 3 if channels == 4 else channels
    mean, std = list(op["mean"]), list(op["std"])
    if len(mean) not in (1, color):
        raise op.fail(f"{len(mean)} means for a {color}-channel image")

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
        raise RowError(f"letterbox: an empty {width}x{height} image")
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
            raise op.fail(f"{height}x{width} is larger than the {h}x{w} image")
        return _crop(image, op, (w - width) // 2, (h - height) // 2, height, width)
    if name == "colorFormat":
        return _convert(image, op, str(color_target(op["format"])))
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
            f"{op.op} would make a {width}x{height} image ({megapixels(height * width)}), over "
            f"the limit of {megapixels(limit)} per image on this executor; raise {MAX_PIXELS_KEY}"
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
    targets = [color_target(op["format"]) for op in ops if op.op == "colorFormat"]
    return bool(targets) and targets[-1] == "GRAY"


def tensor_shape(ops: Sequence[Op]) -> list[int]:
    """``[C, H, W]`` of the tensor output, -1 where it depends on the input."""
    size: tuple[int, int] | None = None
    for op in ops:
        if op.changes_size:
            size = op.fixed_size
    channels = 1 if gray_tensor(ops) else 3
    return [channels, size[0] if size else -1, size[1] if size else -1]


def unroll(pixels: np.ndarray) -> np.ndarray:
    """The samples as float64 in CHW order, channels in the image's own order."""
    planes = pixels.reshape(pixels.shape[0], pixels.shape[1], -1)
    return np.ascontiguousarray(planes.transpose(2, 0, 1), dtype=np.float64).reshape(-1)


# ---------------------------------------------------------------------------------------------
# The Arrow side: rows in, the same rows with the stage's columns out


@dataclass(frozen=True)
class Decoding:
    mode: str
    orientation: bool
    reduce: int
    min_h: int
    min_w: int


@dataclass(frozen=True)
class Plan:
    """What the tasks run: read `input_col` (binary or image struct), compute one value per row
    with `kind` ("decode", "transform", "unroll"), add `output_col` and `error_col`."""

    kind: str
    input_col: str
    binary: bool
    output_col: str
    error_col: str
    setting: str | None
    origin_col: str | None = None
    decoding: Decoding | None = None  # ImageDecoder's settings
    reduced: bool = False  # ImageTransformer on bytes: decode at the first resize's scale
    ops: tuple[Op, ...] = ()
    tensor_order: str | None = None  # set: tensor output in this channel order
    keep: tuple[str, ...] | None = None  # the input columns passed on (default: all)
    read_path: bool = False  # `input_col` names files to read (read_files), not their bytes
    file_setting: str | None = None  # spark.mmlspark.image.maxFileBytes, with read_path
    prior_error_col: str | None = None  # a row with an error here keeps it and is not read
    reread: Decoding | None = None  # transform: read_images' settings; decode each image's
    # origin again, at the first resize's scale


def _row_function(plan: Plan, limit: int) -> Callable[[Any, Any], Any]:
    """The function of one row: (input value, origin) -> the output value."""
    if plan.kind == "decode":
        d = plan.decoding
        assert d is not None
        file_limit = max_file_bytes(plan.file_setting) if plan.read_path else 0

        def decoded(data: Any, origin: Any) -> Any:
            if plan.read_path:
                if data is None:
                    raise RowError("no path (null)")
                data = read_file(data, file_limit)
            pixels = decode(data, d.mode, d.orientation, d.reduce, d.min_h, d.min_w, limit)
            return to_struct(pixels, origin)

        return decoded
    if plan.kind == "unroll":
        return lambda row, _: unroll(from_struct(row))
    ops, order = plan.ops, plan.tensor_order
    target = reduced_decode_target(ops) if plan.reduced or plan.reread else None
    file_limit = max_file_bytes(plan.file_setting) if plan.reread else 0

    def transformed(value: Any, _: Any) -> Any:
        if plan.reread is not None:
            if value is None:
                raise RowError("no input image (null)")
            origin = value["origin"]
            r, (min_h, min_w) = plan.reread, target or (0, 0)
            data = read_file(origin, file_limit)
            first = decode(data, r.mode, r.orientation, 1, min_h, min_w, limit)
        elif plan.binary:
            if value is None:
                raise RowError("no input image (null)")
            min_h, min_w = target or (0, 0)
            first = decode(value, "color", True, 1, min_h, min_w, limit)
            origin = None
        else:
            first = from_struct(value)
            origin = value["origin"]
        out = run_ops(ops, Image(first, order_of(first)), limit)
        return to_chw(out, order) if order is not None else to_struct(out.pixels, origin)

    return transformed


_IMAGE_FIELDS = ("origin", "height", "width", "nChannels", "mode", "data")


def _output_array(plan: Plan, values: list[Any]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    mask = np.array([v is None for v in values], dtype=bool)
    if plan.kind == "unroll" or plan.tensor_order is not None:
        element = pa.float64() if plan.kind == "unroll" else pa.float32()
        lengths = [0 if v is None else v.size for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        present = [v for v in values if v is not None]
        flat = np.concatenate(present) if present else np.zeros(0)
        return pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(flat, type=element), mask=pa.array(mask)
        )
    rows = [(None, 0, 0, 0, 0, None) if v is None else v for v in values]
    types = [pa.string(), pa.int32(), pa.int32(), pa.int32(), pa.int32(), pa.binary()]
    arrays = [pa.array([row[i] for row in rows], type=t) for i, t in enumerate(types)]
    return pa.StructArray.from_arrays(arrays, names=list(_IMAGE_FIELDS), mask=pa.array(mask))


def _rows(column: Any) -> list[Any]:
    return column.to_pylist()  # type: ignore[no-any-return]


def _output_batch(plan: Plan, rows: Any, values: list[Any], errors: list[str | None]) -> Any:
    """`rows` (the kept columns) with the stage's two columns."""
    import pyarrow as pa

    kept = [i for i, n in enumerate(rows.schema.names) if plan.keep is None or n in plan.keep]
    arrays = [rows.column(i) for i in kept] + [
        _output_array(plan, values),
        pa.array(errors, pa.string()),
    ]
    names = [rows.schema.names[i] for i in kept] + [plan.output_col, plan.error_col]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _size(value: Any) -> int:
    if value is None:
        return 0
    return int(value.nbytes) if isinstance(value, np.ndarray) else len(value[5])


def _partition(plan: Plan, batches: Iterator[Any]) -> Iterator[Any]:
    """The rows of `batches` with the stage's columns. Rows are read _ROWS_PER_SLICE at a time
    (an Arrow batch may hold thousands of photos) and written out in batches of up to
    _OUT_ROWS rows or _OUT_BYTES bytes of output, so that a next step in the same UDF (an
    ONNXModel) gets full mini-batches while memory stays bounded on large photos."""
    compute = _row_function(plan, max_pixels(plan.setting))
    for arrow_batch in batches:
        total = arrow_batch.num_rows
        if total == 0:
            yield _output_batch(plan, arrow_batch, [], [])
            continue
        values: list[Any] = []
        errors: list[str | None] = []
        size, first = 0, 0
        for offset in range(0, total, _ROWS_PER_SLICE):
            part = arrow_batch.slice(offset, _ROWS_PER_SLICE)
            inputs = _rows(part.column(plan.input_col))
            origins = (
                _rows(part.column(plan.origin_col)) if plan.origin_col else [None] * part.num_rows
            )
            priors = (
                _rows(part.column(plan.prior_error_col))
                if plan.prior_error_col
                else [None] * part.num_rows
            )
            for value, origin, prior in zip(inputs, origins, priors, strict=True):
                if prior is not None:
                    values.append(None)
                    errors.append(prior)
                    continue
                try:
                    values.append(compute(value, origin))
                    errors.append(None)
                    size += _size(values[-1])
                except Exception as error:  # noqa: BLE001 (a failing row keeps its reason)
                    values.append(None)
                    errors.append(_describe(error))
            end = offset + part.num_rows
            if size >= _OUT_BYTES or len(values) >= _OUT_ROWS or end == total:
                yield _output_batch(plan, arrow_batch.slice(first, end - first), values, errors)
                values, errors, size, first = [], [], 0, end


# ---------------------------------------------------------------------------------------------
# The driver side


def _fail(stage: Any, message: str) -> ValueError:
    """The JVM stage's error (the message format of mmlspark.core.checks.fail), to raise."""
    return ValueError(f"{type(stage).__name__} {stage.uid}: {message}")


def is_image(data_type: Any) -> bool:
    from pyspark.sql import types as T

    return isinstance(data_type, T.StructType) and [
        (f.name, f.dataType) for f in data_type.fields
    ] == [(f.name, f.dataType) for f in image_type().fields]


def image_type() -> Any:
    """Spark's image struct type as the JVM stages write it."""
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("origin", T.StringType(), True),
            T.StructField("height", T.IntegerType(), False),
            T.StructField("width", T.IntegerType(), False),
            T.StructField("nChannels", T.IntegerType(), False),
            T.StructField("mode", T.IntegerType(), False),
            T.StructField("data", T.BinaryType(), True),
        ]
    )


_IMAGE_DESCRIPTION = "an image struct (origin, height, width, nChannels, mode, data)"


def check_input(stage: Any, schema: Any, accepts: Callable[[Any], bool], expected: str) -> Any:
    """The input field of `stage`, checked as the JVM's SchemaUtils.requireColumnType does."""
    from mmlspark.core.checks import require_column_type

    return require_column_type(stage, schema, stage.getOrDefault("inputCol"), expected, accepts)


def _check_columns(stage: Any, schema: Any, accepts: Callable[[Any], bool], expected: str) -> Any:
    """The checks of the JVM's RowwiseTransformer.transformSchema; the input field."""
    from mmlspark.core.checks import require_absent, require_distinct

    field = check_input(stage, schema, accepts, expected)
    out, err = stage.getOrDefault("outputCol"), stage.getOrDefault("errorCol")
    require_absent(stage, schema, out)
    require_absent(stage, schema, err)
    require_distinct(stage, "outputCol and errorCol", [out, err])
    return field


def _stage_plan(stage: Any, dataset: Any | None, kind: str, **fields: Any) -> Plan:
    """The plan of `stage` with its columns (and the pixel limit set for `dataset`'s session)."""
    return Plan(
        kind=kind,
        input_col=stage.getOrDefault("inputCol"),
        output_col=stage.getOrDefault("outputCol"),
        error_col=stage.getOrDefault("errorCol"),
        setting=None if dataset is None else _setting(dataset),
        **fields,
    )


def _setting(dataset: Any) -> str | None:
    value = dataset.sparkSession.conf.get(MAX_PIXELS_KEY, None)
    if value is not None:
        max_pixels(value)  # a bad setting fails here, before any job
    return value  # type: ignore[no-any-return]


def _run(
    dataset: Any,
    plan: Plan,
    output_type: Any,
    metadata: dict[str, Any],
    drop_invalid: bool = False,
) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from mmlspark.core.fused import Step, run_step
    from mmlspark.image import _headers

    added = [
        T.StructField(plan.output_col, output_type, True),
        T.StructField(plan.error_col, T.StringType(), True),
    ]

    def finish(out: Any) -> Any:
        column = F.col(f"`{plan.output_col}`")
        if plan.kind == "unroll":
            from pyspark.ml.functions import array_to_vector

            column = F.when(column.isNotNull(), array_to_vector(column))
        if metadata or plan.kind == "unroll":
            # withMetadata: Spark Connect's withColumn drops an alias's metadata (4.3)
            out = out.withColumn(plan.output_col, column).withMetadata(plan.output_col, metadata)
        return out.filter(F.col(f"`{plan.output_col}`").isNotNull()) if drop_invalid else out

    # The UDF carries this module's code and its twin readers' (pickled by value): the Python
    # workers need numpy, pyarrow and opencv-python, but not mmlspark.
    return run_step(
        dataset,
        Step(_partition, plan),
        added,
        finish,
        [sys.modules[__name__], _headers],
        ends_chain=plan.kind == "unroll",
        keep=plan.keep,
    )


def _binary_or_image(data_type: Any) -> bool:
    from pyspark.sql import types as T

    return isinstance(data_type, T.BinaryType) or is_image(data_type)


def _decoding(decoder: Any) -> Decoding:
    """An ImageDecoder's settings, checked as the JVM stage checks them."""
    mode = decoder.getOrDefault("colorMode")
    reduce = int(decoder.getOrDefault("reduceFactor"))
    if mode not in COLOR_MODES:
        raise _fail(decoder, f"colorMode must be one of {', '.join(COLOR_MODES)} but was '{mode}'")
    if reduce not in (1, 2, 4, 8):
        raise _fail(decoder, f"reduceFactor must be 1, 2, 4 or 8 but was {reduce}")
    return Decoding(
        mode,
        bool(decoder.getOrDefault("applyOrientation")),
        reduce,
        int(decoder.getOrDefault("minHeight")),
        int(decoder.getOrDefault("minWidth")),
    )


#: The metadata key under which read_images records how it decoded its ``image`` column (the JVM's
#: ``ReadSettings``).
READ_KEY = "imageRead"


def read_metadata(decoder: Any) -> dict[str, Any]:
    """The metadata of read_images' ``image`` column, read with `decoder`'s settings."""
    d = _decoding(decoder)
    settings = {
        "colorMode": d.mode,
        "applyOrientation": d.orientation,
        "reduceFactor": d.reduce,
        "minHeight": d.min_h,
        "minWidth": d.min_w,
    }
    return {READ_KEY: settings}


def read_settings(field: Any) -> Decoding | None:
    """read_images' settings recorded on `field`, when it read the images at full size in a mode
    with reduced JPEG decodes (the JVM's ``ReadSettings.of`` and ``fullSize``)."""
    m: Any = field.metadata.get(READ_KEY) if isinstance(field.metadata, dict) else None
    try:
        d = Decoding(
            str(m["colorMode"]),
            bool(m["applyOrientation"]),
            int(m["reduceFactor"]),
            int(m["minHeight"]),
            int(m["minWidth"]),
        )
    except (TypeError, KeyError, ValueError):
        return None
    full = d.reduce == 1 and d.min_h == 0 and d.min_w == 0 and d.mode != "unchanged"
    return d if full else None


def transform_decoder(
    stage: Any,
    dataset: Any,
    keep: tuple[str, ...] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """ImageDecoder's output on the Python backend (with only the input columns `keep`, when
    given, before its own)."""
    from pyspark.sql import types as T

    _check_columns(stage, dataset.schema, lambda t: isinstance(t, T.BinaryType), "binary")
    origin = stage.getOrDefault("originCol")
    if origin:
        from mmlspark.core.checks import require_column_type

        require_column_type(
            stage, dataset.schema, origin, "string", lambda t: isinstance(t, T.StringType)
        )
    plan = _stage_plan(
        stage,
        dataset,
        "decode",
        binary=True,
        origin_col=origin or None,
        decoding=_decoding(stage),
        keep=keep,
    )
    return _run(
        dataset, plan, image_type(), metadata or {}, bool(stage.getOrDefault("dropInvalid"))
    )


def read_files(
    decoder: Any,
    files: Any,
    keep: tuple[str, ...] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """``read_files`` on the Python backend: the files of a listing (``path``, ``error``, ...)
    read in the tasks from local and mounted paths and decoded with `decoder`'s settings; the
    listing's columns but ``error``, then ``image`` and ``error`` (the listing's, the read's or
    the decode's), as the JVM's ``ImageReader.readFiles`` gives them (with `keep`, only those of
    the listing's columns)."""
    from pyspark.sql import types as T

    from mmlspark.core.checks import require_column_type

    for name in ("path", "error"):
        require_column_type(
            decoder, files.schema, name, "string", lambda t: isinstance(t, T.StringType)
        )
    prior = f"__listing_error_{decoder.uid}"
    kept = tuple(c for c in files.columns if c != "error" and (keep is None or c in keep))
    plan = Plan(
        kind="decode",
        input_col="path",
        binary=True,
        output_col="image",
        error_col="error",
        setting=_setting(files),
        origin_col="path",
        decoding=_decoding(decoder),
        keep=kept,
        read_path=True,
        file_setting=files.sparkSession.conf.get(MAX_FILE_BYTES_KEY, None),
        prior_error_col=prior,
    )
    if plan.file_setting is not None:
        max_file_bytes(plan.file_setting)  # a bad setting fails here, before any job
    listing = files.withColumnRenamed("error", prior)
    drop = bool(decoder.getOrDefault("dropInvalid"))
    return _run(listing, plan, image_type(), metadata or {}, drop)


#: EXIF lives in the JPEG's APP1 segment, at most 64 KiB, near the start of the file.
_HEAD_BYTES = 128 << 10


def _taken_partition(out_col: str, batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        seconds: list[float | None] = []
        for path in batch.column("path").to_pylist():
            try:
                seconds.append(
                    None if path is None else exif_seconds(read_file(path, 0, _HEAD_BYTES))
                )
            except RowError:
                seconds.append(None)
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(seconds, pa.float64())], names=[*batch.schema.names, out_col]
        )


def taken_times(files: Any, out_col: str) -> Any:
    """`files` (a listing with ``path``) with `out_col`: each photo's EXIF DateTimeOriginal in
    seconds (null: not a JPEG, none, unreadable), read from the first 128 KiB of each file by the
    Python workers (the JVM's ``TakenTimes.add``)."""
    from pyspark import cloudpickle
    from pyspark.sql import types as T

    from mmlspark.image import _headers

    for module in (sys.modules[__name__], _headers):
        cloudpickle.register_pickle_by_value(module)
    schema = T.StructType([*files.schema.fields, T.StructField(out_col, T.DoubleType(), True)])
    from mmlspark.core.arrow_map import map_in_arrow

    return map_in_arrow(files, lambda batches: _taken_partition(out_col, batches), schema)


def transform_images(stage: Any, dataset: Any) -> Any:
    """ImageTransformer's output on the Python backend."""
    from pyspark.sql import types as T

    field = _check_columns(
        stage,
        dataset.schema,
        _binary_or_image,
        _IMAGE_DESCRIPTION + " or encoded image bytes (binary)",
    )
    try:
        ops = tuple(parse_ops(stage.getOrDefault("operations")))
    except ValueError as error:
        raise _fail(stage, str(error)) from None
    binary = isinstance(field.dataType, T.BinaryType)
    tensor = bool(stage.getOrDefault("toTensor"))
    order = None
    metadata: dict[str, Any] = {}
    if tensor:
        requested = str(stage.getOrDefault("tensorChannelOrder")).strip().upper()
        if requested not in ("RGB", "BGR"):
            raise _fail(
                stage, f"'{stage.getOrDefault('tensorChannelOrder')}' is not one of 'RGB', 'BGR'"
            )
        order = "GRAY" if gray_tensor(ops) else requested
        metadata = {"tensorShape": tensor_shape(ops), "tensorChannelOrder": order}
    reduced = bool(stage.getOrDefault("reducedDecode"))
    read = read_settings(field) if reduced and not binary else None
    reread = read if read is not None and reduced_decode_target(ops) else None
    plan = _stage_plan(
        stage,
        dataset,
        "transform",
        binary=binary,
        reduced=binary and reduced,
        ops=ops,
        tensor_order=order,
        reread=reread,
        file_setting=dataset.sparkSession.conf.get(MAX_FILE_BYTES_KEY, None) if reread else None,
    )
    output_type = T.ArrayType(T.FloatType(), False) if tensor else image_type()
    return _run(dataset, plan, output_type, metadata)


def transform_unroll(stage: Any, dataset: Any) -> Any:
    """UnrollImage's output on the Python backend."""
    _check_columns(stage, dataset.schema, is_image, _IMAGE_DESCRIPTION)
    plan = _stage_plan(
        stage,
        None,
        "unroll",
        binary=False,
    )
    from pyspark.sql import types as T

    return _run(dataset, plan, T.ArrayType(T.DoubleType(), False), {})
