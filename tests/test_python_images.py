"""The Python backend of the image stages against the JVM stages: parity is its contract.

The Python backend runs ImageDecoder, ImageTransformer, UnrollImage and read_images with
opencv-python 4.9 in Arrow UDFs, the same OpenCV version as the jar's (4.9.0). A pipeline must
give the same results whichever backend runs it, so every case here runs one stage, with the same
params, once with ``setBackend("jvm")`` and once with ``setBackend("python")`` on the same
DataFrame, and checks that:

- the output columns, their types (nested nullability included) and their metadata
  (``tensorShape``, ``tensorChannelOrder``) are the same;
- as many rows come out as went in (with ``dropInvalid``, exactly the good ones);
- image structs agree field by field, the ``data`` bytes exactly (same OpenCV, same pixels);
  tensors and vectors are equal (``assert_array_equal``), except in the few cases marked
  ``rtol=1e-6``, where OpenCV runs float kernels after ``normalize`` and its two builds may round
  differently;
- error columns hold the same text. Expected errors are also checked against the JVM's text, and
  every other row must have none, so that two backends agreeing on a wrong null (or on a wrong
  error) fail too.

The cases follow the JVM suites (ImageTransformerSuite, FusedDecodeSuite, ImageStagesSuites,
ImageLimitsSuite) and every operation of the registry in ImageOp.scala, with their edge cases:
rounding rules, odd remainders, saturation, 1-, 2-, 3- and 4-channel and 16-bit inputs, EXIF
orientations, reduced decoding and the pixel limit. Images are small (at most 64 pixels a side,
besides the few made to pass the pixel limit) and each input kind is one module-scoped DataFrame.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from image_fixtures import BAD, encode, pattern, with_exif_orientation, write_all
from pyspark.ml.linalg import DenseVector, SparseVector
from pyspark.sql import DataFrame, Row
from pyspark.sql import types as T
from pyspark.sql.functions import col

from mmlspark.image import ImageDecoder, UnrollImage, read_images
from mmlspark.opencv import ImageTransformer
from mmlspark.opencv._ImageOps import (
    INTER_AREA,
    INTER_CUBIC,
    INTER_LANCZOS4,
    INTER_LINEAR,
    INTER_NEAREST,
    OPERATIONS,
    THRESH_BINARY,
    THRESH_BINARY_INV,
    THRESH_TOZERO,
    THRESH_TOZERO_INV,
    THRESH_TRUNC,
)

# -- comparing the two outputs ------------------------------------------------------------------

IMAGE_FIELDS = ["origin", "height", "width", "nChannels", "mode", "data"]
FLOAT_DEPTH = 5  # CV_32F


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _same_pixels(where: str, e: Row, g: Row, rtol: float) -> None:
    a, b = bytes(e["data"]), bytes(g["data"])
    if rtol and e["mode"] & 7 == FLOAT_DEPTH:
        np.testing.assert_allclose(
            np.frombuffer(b, "<f4"), np.frombuffer(a, "<f4"), rtol=rtol, atol=1e-6, err_msg=where
        )
        return
    if a != b:
        n = min(len(a), len(b))
        differ = np.flatnonzero(np.frombuffer(a[:n], np.uint8) != np.frombuffer(b[:n], np.uint8))
        first = int(differ[0]) if differ.size else n
        raise AssertionError(
            f"{where}.data: jvm {len(a)} bytes, python {len(b)} bytes; {differ.size} of the "
            f"first {n} differ, the first at byte {first}"
        )


def _same_value(where: str, e: Any, g: Any, rtol: float) -> None:
    if e is None or g is None:
        assert e is None and g is None, f"{where}: jvm {_show(e)} but python {_show(g)}"
    elif isinstance(e, Row) and getattr(e, "__fields__", None) == IMAGE_FIELDS:
        assert isinstance(g, Row) and getattr(g, "__fields__", None) == IMAGE_FIELDS, where
        for field in IMAGE_FIELDS[:-1]:
            assert g[field] == e[field], f"{where}.{field}: jvm {e[field]!r}, python {g[field]!r}"
        _same_pixels(where, e, g, rtol)
    elif isinstance(e, (DenseVector, SparseVector)):
        assert type(g) is type(e), f"{where}: jvm {type(e).__name__}, python {type(g).__name__}"
        np.testing.assert_array_equal(g.toArray(), e.toArray(), err_msg=where)
    elif isinstance(e, list):  # a tensor (array<float>)
        expected, got = np.asarray(e, np.float32), np.asarray(g, np.float32)
        assert got.shape == expected.shape, f"{where}: {expected.shape} vs {got.shape}"
        if rtol:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6, err_msg=where)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=where)
    elif isinstance(e, (bytes, bytearray)):
        assert isinstance(g, (bytes, bytearray)) and bytes(g) == bytes(e), where
    else:
        assert type(g) is type(e) and g == e, f"{where}: jvm {_show(e)}, python {_show(g)}"


def _same_row(
    key: Any,
    e: Row,
    g: Row,
    columns: list[str],
    rtol: float,
    error_col: str | None,
    error_text: Callable[[str], str],
) -> None:
    for name in columns:
        if name == error_col and e[name] is not None and g[name] is not None:
            assert error_text(g[name]) == error_text(e[name]), (
                f"{key}: error text differs\n  jvm:    {e[name]}\n  python: {g[name]}"
            )
        else:
            _same_value(f"{key}.{name}", e[name], g[name], rtol)


def _same_schema(jvm_df: DataFrame, py_df: DataFrame, nullable: bool = True) -> None:
    assert jvm_df.columns == py_df.columns, (jvm_df.columns, py_df.columns)
    for a, b in zip(jvm_df.schema.fields, py_df.schema.fields, strict=True):
        assert a.dataType == b.dataType, f"{a.name}: jvm {a.dataType!r}\n  python {b.dataType!r}"
        assert a.metadata == b.metadata, f"{a.name}: jvm {a.metadata}, python {b.metadata}"
        if nullable:
            assert a.nullable == b.nullable, f"{a.name}: nullable {a.nullable} vs {b.nullable}"


def _expected_errors(
    rows: dict[Any, Row], error_col: str, output_col: str | None, errors: dict[Any, str]
) -> None:
    """The rows named in `errors` have an error containing its text (and no output); every other
    row has no error (and an output)."""
    unknown = set(errors) - set(rows)
    assert not unknown, f"expected errors for rows that are not in the output: {unknown}"
    for key, row in rows.items():
        got, want = row[error_col], errors.get(key)
        if want is None:
            assert got is None, f"{key}: unexpected error {got!r}"
        else:
            assert got is not None and want in got, f"{key}: expected {want!r}, got {got!r}"
        if output_col is not None:
            assert (row[output_col] is None) == (want is not None), (key, got)


def assert_same(
    jvm_df: DataFrame,
    py_df: DataFrame,
    *,
    rows: int,
    key: str = "name",
    error_col: str | None = None,
    output_col: str | None = None,
    errors: dict[Any, str] | None = None,
    rtol: float = 0.0,
    error_text: Callable[[str], str] = lambda text: text,
) -> dict[Any, Row]:
    """The two outputs agree: columns, types, nullability and metadata; `rows` rows each, with the
    same keys; every value (see the module docstring). With `errors`, also the JVM's error texts
    (see `_expected_errors`). Returns the JVM's rows by key."""
    _same_schema(jvm_df, py_df)
    jvm_rows, py_rows = jvm_df.collect(), py_df.collect()
    assert len(jvm_rows) == rows, f"the JVM gave {len(jvm_rows)} rows for {rows}"
    assert len(py_rows) == rows, f"the Python backend gave {len(py_rows)} rows for {rows}"
    jvm_by = {r[key]: r for r in jvm_rows}
    py_by = {r[key]: r for r in py_rows}
    assert len(jvm_by) == len(py_by) == rows, "keys repeat"
    assert set(jvm_by) == set(py_by)
    for k in sorted(jvm_by, key=str):
        _same_row(k, jvm_by[k], py_by[k], jvm_df.columns, rtol, error_col, error_text)
    if errors is not None:
        assert error_col is not None
        _expected_errors(jvm_by, error_col, output_col, errors)
    return jvm_by


def _params(stage: Any) -> dict[str, Any]:
    return {param.name: value for param, value in stage.extractParamMap().items()}


def both(make: Callable[[], Any], df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The outputs of the stage `make()` builds, run on the JVM and on the Python backend."""
    jvm = make().setBackend("jvm")
    python = make().setBackend("python")
    assert (jvm.getBackend(), python.getBackend()) == ("jvm", "python")
    assert _params(jvm) == _params(python)
    return jvm.transform(df), python.transform(df)


MAX_PIXELS = "spark.mmlspark.image.maxPixels"


@contextmanager
def pixel_limit(spark: Any, pixels: int) -> Iterator[None]:
    """Sets the pixel limit for both backends, and unsets it after. The JVM reads it from the
    executors' SparkConf (SparkEnv's, read on every row), which in local mode is the driver's
    SparkConf, changed here in place; the Python backend reads the session's conf. No other test
    sets it: the defaults come from the heap."""
    live = spark.sparkContext._jsc.sc().conf()
    spark.conf.set(MAX_PIXELS, str(pixels))
    live.set(MAX_PIXELS, str(pixels))
    try:
        yield
    finally:
        spark.conf.unset(MAX_PIXELS)
        live.remove(MAX_PIXELS)


def case(name: str, make: Callable[[], Any], errors: dict | None = None, rtol: float = 0.0):
    return pytest.param(make, errors or {}, rtol, id=name)


def it(**params: Any) -> ImageTransformer:
    return ImageTransformer(**params)


# -- inputs -------------------------------------------------------------------------------------

COLOR = pattern(48, 64)  # write_all's color image
DEEP16 = (pattern(20, 24, seed=6).astype(np.uint16) << 8) | pattern(20, 24, seed=16)
GRAY16 = ((pattern(30, 26, 1, seed=7).astype(np.uint16) << 8) | pattern(30, 26, 1, seed=17))[..., 0]
ALPHA16 = np.dstack([DEEP16, pattern(20, 24, 1, seed=8).astype(np.uint16) * 257])

# The images of the ImageTransformer cases: 1 to 4 channels, 8 and 16 bits, odd sizes, no image.
IMAGES: dict[str, np.ndarray | None] = {
    "landscape": pattern(48, 64, seed=1),
    "portrait": pattern(61, 37, seed=2),
    "square": pattern(33, 33, seed=3),
    "gray": pattern(40, 30, 1, seed=4)[..., 0],  # and no origin
    "bgra": np.dstack([pattern(48, 64, seed=5), pattern(48, 64, 1, seed=15)]),
    "deep16": DEEP16,
    "gray16": GRAY16,
    "two": pattern(24, 20, 2, seed=9),  # 2 channels: no color conversion takes it
    "null": None,
}
NO_ORIGIN = {"gray"}

# Shapes whose resizes round at exact halves (resizeShorter rounds half up, letterbox half to
# even) or to zero (letterbox keeps at least 1 pixel).
TINY = {
    f"{h}x{w}": pattern(h, w, seed=h * 31 + w)
    for h, w in [(4, 6), (6, 4), (5, 8), (8, 5), (10, 25), (25, 10), (1, 9), (9, 1), (7, 3)]
}

IMAGE_TYPE = T.StructType(  # Spark's image struct, as ImageSchema.columnSchema types it
    [
        T.StructField("origin", T.StringType(), True),
        T.StructField("height", T.IntegerType(), False),
        T.StructField("width", T.IntegerType(), False),
        T.StructField("nChannels", T.IntegerType(), False),
        T.StructField("mode", T.IntegerType(), False),
        T.StructField("data", T.BinaryType(), False),
    ]
)
STRUCTS_SCHEMA = T.StructType(
    [T.StructField("name", T.StringType(), False), T.StructField("image", IMAGE_TYPE, True)]
)
ENCODED_SCHEMA = T.StructType(
    [
        T.StructField("name", T.StringType(), False),
        T.StructField("path", T.StringType(), True),
        T.StructField("content", T.BinaryType(), True),
    ]
)
DEPTHS = {"uint8": 0, "uint16": 2, "float32": 5, "float64": 6}  # OpenCV depth codes


def image_struct(pixels: np.ndarray | None, origin: str | None) -> tuple | None:
    """Spark's image struct of `pixels` (HxW or HxWxC), samples little-endian."""
    if pixels is None:
        return None
    p = pixels if pixels.ndim == 3 else pixels[:, :, None]
    height, width, channels = p.shape
    mode = DEPTHS[p.dtype.name] + ((channels - 1) << 3)  # CV_MAKETYPE
    data = p.astype(p.dtype.newbyteorder("<")).tobytes()
    return (origin, height, width, channels, mode, bytearray(data))


def struct_frame(spark: Any, images: dict[str, np.ndarray | None]) -> tuple[DataFrame, int]:
    rows = [
        (name, image_struct(pixels, None if name in NO_ORIGIN else f"mem://{name}"))
        for name, pixels in images.items()
    ]
    return spark.createDataFrame(rows, STRUCTS_SCHEMA), len(rows)


def gradient(height: int, width: int, channels: int = 3) -> np.ndarray:
    """A smooth image without noise: its PNG stays small however large the image."""
    y, x = np.mgrid[0:height, 0:width]
    planes = [x * 255 // (width - 1), y * 255 // (height - 1), (x + y) * 255 // (width + height)]
    return np.stack(planes[:channels], -1).astype(np.uint8)


def jpeg_claiming(width: int, height: int) -> bytes:
    """A small valid JPEG whose frame header is rewritten to claim `width` x `height`."""
    data = bytearray(encode(np.full((16, 16, 3), 90, np.uint8), ".jpg"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def with_big_endian_exif(jpeg: bytes, orientation: int) -> bytes:
    """`with_exif_orientation` with a big-endian ("MM") TIFF block."""
    tiff = b"MM\x00*" + struct.pack(">I", 8)
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + bytes(4)
    payload = b"Exif\x00\x00" + tiff + ifd
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return jpeg[:2] + app1 + jpeg[2:]


def encoded_frame(spark: Any, files: dict[str, bytes | None]) -> tuple[DataFrame, int]:
    rows = [
        (
            name,
            None if name == "nopath.png" else f"file:/photos/{name}",
            None if data is None else bytearray(data),
        )
        for name, data in files.items()
    ]
    return spark.createDataFrame(rows, ENCODED_SCHEMA), len(rows)


def subset(frame: tuple[DataFrame, int], names: list[str]) -> tuple[DataFrame, int]:
    return frame[0].filter(col("name").isin(names)), len(names)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """write_all's files (no large one), one in a subfolder, and two that file sources skip."""
    path = tmp_path_factory.mktemp("parity_photos")
    files = write_all(path, large=False)
    (path / "sub").mkdir()
    (path / "sub" / "nested.png").write_bytes(encode(pattern(20, 30, seed=21), ".png"))
    (path / "_SUCCESS").write_bytes(b"")
    (path / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    return path, files


@pytest.fixture(scope="module")
def encoded(spark, folder) -> tuple[DataFrame, int]:
    """Every format of write_all, more JPEG variants and every kind of bad bytes, as a binary
    column with the path beside it."""
    files: dict[str, bytes | None] = dict(folder[1])
    jpeg = files["color.jpg"]
    assert jpeg is not None
    files.update(
        {
            "progressive.jpg": encode(COLOR, ".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
            "gray.jpg": encode(pattern(40, 30, 1, seed=4)[..., 0], ".jpg"),
            "gray16.png": encode(GRAY16, ".png"),
            "alpha16.png": encode(ALPHA16, ".png"),
            "nopath.png": files["color.png"],  # a null origin
            **{f"exif{k}.jpg": with_exif_orientation(jpeg, k) for k in range(1, 9)},
            "exif9.jpg": with_exif_orientation(jpeg, 9),  # not an orientation: read as 1
            "exif6-big-endian.jpg": with_big_endian_exif(jpeg, 6),
            "padded.jpg": jpeg + bytes(100),  # bytes after the end marker, as cameras write
            # The JVM looks for the end marker in the last KiB only: this one is "truncated".
            "padded2k.jpg": jpeg + bytes(2000),
            "halved.jpg": jpeg[: len(jpeg) // 2],  # cut in the middle of the scan
            "hollow.jpg": hollow_jpeg(jpeg),
            "missing.jpg": None,
            "short.bin": b"\x01\x02",
            "soi.jpg": b"\xff\xd8\xff",  # a JPEG start and nothing else
        }
    )
    return encoded_frame(spark, files)


@pytest.fixture(scope="module")
def structs(spark) -> tuple[DataFrame, int]:
    return struct_frame(spark, IMAGES)


@pytest.fixture(scope="module")
def tiny(spark) -> tuple[DataFrame, int]:
    return struct_frame(spark, TINY)


@pytest.fixture(scope="module")
def odd_structs(spark) -> tuple[DataFrame, int]:
    """Float images, and structs the stages must refuse row by row."""
    rows = [
        ("float", image_struct(pattern(3, 4, seed=9).astype(np.float32) / 7 - 5, "mem://f")),
        ("floatgray", image_struct(pattern(3, 4, 1, seed=10).astype(np.float32) * 0.5, None)),
        ("short", ("mem://short", 4, 4, 3, 16, bytearray(10))),  # 10 bytes for 4x4x3
        ("f64", image_struct(np.full((2, 2), 0.5), "mem://f64")),  # CV_64F: not an image mode
        ("null", None),
    ]
    return spark.createDataFrame(rows, STRUCTS_SCHEMA), len(rows)


@pytest.fixture(scope="module")
def unchanged16(encoded) -> tuple[DataFrame, int]:
    """PNGs decoded by the JVM's ImageDecoder with colorMode="unchanged": 8- and 16-bit gray,
    BGR and BGRA image structs, as the ImageTransformer cases on 16-bit inputs take them."""
    names = ["deep16.png", "gray16.png", "alpha16.png", "alpha.png", "gray.png", "color.png"]
    df, n = subset(encoded, names)
    decoder = ImageDecoder(inputCol="content", originCol="path", colorMode="unchanged")
    decoded = decoder.setBackend("jvm").transform(df).select("name", "image")
    modes = {r["name"]: r["mode"] for r in decoded.select("name", "image.mode").collect()}
    assert modes["deep16.png"] == 18 and modes["gray16.png"] == 2 and modes["alpha16.png"] == 26
    return decoded, n


# -- ImageDecoder -------------------------------------------------------------------------------

DECODE_ERRORS = {
    "missing.jpg": "no data (null)",
    "empty.jpg": "empty file (0 bytes)",
    "notes.jpg": (
        "not a decodable image (34 bytes starting 66 69 65 6c): unknown format or corrupt data"
    ),
    "truncated.jpg": "truncated JPEG: no end-of-image marker in 600 bytes",
    "halved.jpg": "truncated JPEG: no end-of-image marker in ",
    "padded2k.jpg": "truncated JPEG: no end-of-image marker in ",
    "short.bin": "not a decodable image (2 bytes starting 01 02): unknown format or corrupt data",
    "soi.jpg": "truncated JPEG: no end-of-image marker in 3 bytes",
    # 48x64 in 4:2:0: 4 x 3 MCUs of 16x16, each of 4 luma and 2 chroma blocks
    "hollow.jpg": "corrupt JPEG: 4 bytes of image data for a frame of 72 8x8 blocks, which takes "
    "at least 9; the file is damaged",
}
assert set(BAD) <= set(DECODE_ERRORS)


def hollow_jpeg(jpeg: bytes) -> bytes:
    """`jpeg` with its image data cut out and its end marker kept: headers through the scan
    header, 4 bytes, FF D9. libjpeg (opencv-python here) decodes it as gray without an error."""
    sos = jpeg.index(b"\xff\xda")
    header_end = sos + 2 + int.from_bytes(jpeg[sos + 2 : sos + 4], "big")
    hollow = jpeg[:header_end] + bytes(4) + b"\xff\xd9"
    decoded = cv2.imdecode(np.frombuffer(hollow, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None and decoded.shape == (48, 64, 3)  # no error from libjpeg
    return hollow


DECODES = [
    pytest.param({}, id="color"),
    pytest.param({"colorMode": "grayscale"}, id="grayscale"),
    pytest.param({"colorMode": "unchanged"}, id="unchanged"),
    pytest.param({"applyOrientation": False}, id="color-no-orientation"),
    pytest.param({"colorMode": "grayscale", "applyOrientation": False}, id="gray-no-orientation"),
    pytest.param({"colorMode": "unchanged", "applyOrientation": False}, id="unchanged-no-orient"),
    pytest.param({"reduceFactor": 2}, id="reduce2"),
    pytest.param({"reduceFactor": 4}, id="reduce4"),
    pytest.param({"reduceFactor": 8}, id="reduce8"),
    pytest.param({"colorMode": "grayscale", "reduceFactor": 4}, id="grayscale-reduce4"),
    # unchanged is decoded whole and resized (INTER_AREA) to ceil(size / factor)
    pytest.param({"colorMode": "unchanged", "reduceFactor": 2}, id="unchanged-reduce2"),
    pytest.param({"colorMode": "unchanged", "reduceFactor": 8}, id="unchanged-reduce8"),
    # The JPEG scale is chosen on the oriented size: 1/2 for the 64x48 of orientations 5-8, full
    # size for the 48x64 of the others.
    pytest.param({"minHeight": 30, "minWidth": 20}, id="min-30x20"),
    pytest.param(
        {"minHeight": 30, "minWidth": 20, "applyOrientation": False}, id="min-30x20-no-orientation"
    ),
    # minHeight/minWidth replace reduceFactor; formats other than JPEG then decode at full size
    pytest.param({"minHeight": 12, "minWidth": 12, "reduceFactor": 4}, id="min-12-over-reduce4"),
    pytest.param({"minWidth": 25}, id="min-width-only"),
    pytest.param({"colorMode": "grayscale", "minHeight": 6, "minWidth": 6}, id="grayscale-min-6"),
    pytest.param({"colorMode": "unchanged", "minHeight": 6, "minWidth": 6}, id="unchanged-min-6"),
]


@pytest.mark.parametrize("params", DECODES)
def test_image_decoder(encoded, params):
    df, n = encoded
    jvm, py = both(lambda: ImageDecoder(inputCol="content", originCol="path", **params), df)
    rows = assert_same(jvm, py, rows=n, error_col="error", output_col="image", errors=DECODE_ERRORS)
    assert rows["nopath.png"]["image"]["origin"] is None
    assert rows["color.png"]["image"]["origin"] == "file:/photos/color.png"


def test_image_decoder_without_an_origin_column(encoded):
    df, n = encoded
    jvm, py = both(lambda: ImageDecoder(inputCol="content"), df)
    rows = assert_same(jvm, py, rows=n, error_col="error", output_col="image", errors=DECODE_ERRORS)
    assert {r["image"]["origin"] for r in rows.values() if r["image"] is not None} == {None}


def test_image_decoder_drop_invalid_drops_exactly_the_bad_rows(encoded):
    df, n = encoded
    jvm, py = both(
        lambda: ImageDecoder(originCol="path", colorMode="grayscale", dropInvalid=True), df
    )
    rows = assert_same(
        jvm, py, rows=n - len(DECODE_ERRORS), error_col="error", output_col="image", errors={}
    )
    assert set(rows).isdisjoint(DECODE_ERRORS)


# -- read_images --------------------------------------------------------------------------------


def _relative(path: str, root: Path) -> str:
    return str(Path(re.sub(r"^file:/*", "/", path)).relative_to(root))


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"colorMode": "unchanged", "reduceFactor": 2}, id="unchanged-reduce2"),
        pytest.param({"pathGlobFilter": "*.jpg", "applyOrientation": False}, id="jpg-no-orient"),
        pytest.param({"minHeight": 20, "minWidth": 20}, id="min-20"),
        pytest.param({"dropInvalid": True}, id="dropInvalid"),
    ],
)
def test_read_images(spark, folder, options):
    root, files = folder
    jvm = read_images(spark, str(root), backend="jvm", **options)
    py = read_images(spark, str(root), backend="python", **options)
    # Types and metadata agree; the nullability of `path` may not (the JVM's listing leaves it
    # nullable, Spark's binaryFile source does not).
    _same_schema(jvm, py, nullable=False)
    assert jvm.columns == ["path", "image", "error"]
    jvm_by = {_relative(r["path"], root): r for r in jvm.collect()}
    py_by = {_relative(r["path"], root): r for r in py.collect()}

    names = set(files) | {"sub/nested.png"}  # _SUCCESS and .DS_Store are skipped by both
    if "pathGlobFilter" in options:
        names = {n for n in names if fnmatch(Path(n).name, options["pathGlobFilter"])}
    if options.get("dropInvalid"):
        names -= set(BAD)
    assert set(jvm_by) == names
    # The one difference allowed: the Python path reads the folder with Spark's binaryFile
    # source, which skips zero-length files (read_images' docstring says so of Spark Connect's
    # path), so empty.jpg may have no row there; the JVM's listing gives it one, with its error.
    missing = set(jvm_by) - set(py_by)
    assert set(py_by) <= set(jvm_by), set(py_by) - set(jvm_by)
    assert missing <= {"empty.jpg"}, missing
    if "empty.jpg" in jvm_by:
        assert jvm_by["empty.jpg"]["error"] == "empty file (0 bytes)"
        assert jvm_by["empty.jpg"]["image"] is None
    for name in sorted(py_by):
        _same_row(name, jvm_by[name], py_by[name], jvm.columns, 0.0, "error", lambda t: t)
    for name, row in jvm_by.items():
        reason = BAD.get(name)
        if reason is None:
            assert row["error"] is None, (name, row["error"])
            assert row["image"]["origin"] == row["path"]
        else:
            assert row["error"] is not None and reason in row["error"], (name, row["error"])
            assert row["image"] is None


# -- ImageTransformer on image structs ----------------------------------------------------------

NULL_IMAGE = {"null": "no input image (null)"}
IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
NORMALIZE_3 = {
    "gray": "normalize: 3 means for a 1-channel image",
    "gray16": "normalize: 3 means for a 1-channel image",
    "two": "normalize: 3 means for a 2-channel image",
}
INTERPOLATIONS = {
    "nearest": INTER_NEAREST,
    "linear": INTER_LINEAR,
    "cubic": INTER_CUBIC,
    "area": INTER_AREA,
    "lanczos4": INTER_LANCZOS4,
}
THRESHOLDS = {
    "binary": THRESH_BINARY,
    "binary-inv": THRESH_BINARY_INV,
    "trunc": THRESH_TRUNC,
    "tozero": THRESH_TOZERO,
    "tozero-inv": THRESH_TOZERO_INV,
}


def two_cannot(target: str) -> dict[str, str]:
    """The error of the 2-channel image wherever a color conversion (or the tensor's) meets it."""
    return {"two": f"colorFormat: cannot convert a 2-channel BGR image to {target}"}


def _example(name: str) -> Callable[[], ImageTransformer]:
    spec = OPERATIONS[name]
    return lambda: getattr(ImageTransformer(), spec["method"])(**spec["example"])


def _resize(height: int, width: int, interpolation: int) -> Callable[[], ImageTransformer]:
    return lambda: it().resize(height, width, interpolation=interpolation)


def _flip(code: int) -> Callable[[], ImageTransformer]:
    return lambda: it().flip(code)


def _threshold(code: int) -> Callable[[], ImageTransformer]:
    return lambda: it().threshold(100, 200, code)


# The errors of each registry example on IMAGES, besides the null image's.
EXAMPLE_ERRORS = {
    "colorFormat": two_cannot(OPERATIONS["colorFormat"]["example"]["format"].upper()),
    "normalize": NORMALIZE_3,
}

STRUCT_CASES = [
    # every operation of the registry with the example of its OpSpec companion
    *[case(f"example-{name}", _example(name), EXAMPLE_ERRORS.get(name)) for name in OPERATIONS],
    *[case(f"resize-{name}", _resize(20, 30, code)) for name, code in INTERPOLATIONS.items()],
    *[
        case(f"resize-up-{name}", _resize(70, 90, code))
        for name, code in INTERPOLATIONS.items()
        if code in (INTER_CUBIC, INTER_AREA, INTER_LANCZOS4)
    ],
    case("resize-size-square", lambda: it().resize(size=20)),
    # The longer side is longer * size / shorter, rounded half up (portrait and landscape inputs).
    case("resize-shorter-16", lambda: it().resize(size=16, keepAspectRatio=True)),
    case(
        "resize-shorter-25-nearest",
        lambda: it().resize(size=25, keepAspectRatio=True, interpolation=INTER_NEAREST),
    ),
    case("resize-shorter-up-100", lambda: it().resize(size=100, keepAspectRatio=True)),
    case("crop-inside", lambda: it().crop(0, 0, 20, 20)),
    case(
        "crop-outside",
        lambda: it().crop(5, 7, 20, 25),
        {
            "deep16": "crop: region x=5 y=7 20x25 lies outside the 20x24 image",
            "gray16": "crop: region x=5 y=7 20x25 lies outside the 30x26 image",
            "two": "crop: region x=5 y=7 20x25 lies outside the 24x20 image",
        },
    ),
    # offsets (H - h) // 2 and (W - w) // 2, odd remainders rounded down
    case(
        "centerCrop-odd-remainders",
        lambda: it().centerCrop(21, 33),
        {
            "gray": "centerCrop: 21x33 is larger than the 40x30 image",
            "deep16": "centerCrop: 21x33 is larger than the 20x24 image",
            "gray16": "centerCrop: 21x33 is larger than the 30x26 image",
            "two": "centerCrop: 21x33 is larger than the 24x20 image",
        },
    ),
    case(
        "centerCrop-larger-than-the-image",
        lambda: it().centerCrop(41, 31),
        {
            "square": "centerCrop: 41x31 is larger than the 33x33 image",
            "gray": "centerCrop: 41x31 is larger than the 40x30 image",
            "deep16": "centerCrop: 41x31 is larger than the 20x24 image",
            "gray16": "centerCrop: 41x31 is larger than the 30x26 image",
            "two": "centerCrop: 41x31 is larger than the 24x20 image",
        },
    ),
    # from 1 (GRAY), 3 (BGR) and 4 (BGRA) channels; 2 channels cannot be converted
    case("colorFormat-RGB", lambda: it().colorFormat("RGB"), two_cannot("RGB")),
    case("colorFormat-BGR", lambda: it().colorFormat("BGR"), two_cannot("BGR")),
    case("colorFormat-GRAY", lambda: it().colorFormat("GRAY"), two_cannot("GRAY")),
    case("colorFormat-lowercase", lambda: it().colorFormat("rgb"), two_cannot("RGB")),
    case(
        "colorFormat-opencv-code",
        lambda: it().colorFormat(str(cv2.COLOR_BGR2GRAY)),
        two_cannot("GRAY"),
    ),
    case("RGB-then-GRAY", lambda: it().colorFormat("RGB").colorFormat("GRAY"), two_cannot("RGB")),
    case("GRAY-then-BGR", lambda: it().colorFormat("GRAY").colorFormat("BGR"), two_cannot("GRAY")),
    case("RGB-then-BGR", lambda: it().colorFormat("RGB").colorFormat("BGR"), two_cannot("RGB")),
    *[case(f"flip{code}", _flip(code)) for code in (-1, 0, 1)],
    case("blur-5x3", lambda: it().blur(5, 3)),
    case("blur-1x7", lambda: it().blur(1, 7)),
    *[case(f"threshold-{name}", _threshold(code)) for name, code in THRESHOLDS.items()],
    # a fractional threshold, and a maxVal over 255 that saturates on 8-bit images
    case("threshold-saturating", lambda: it().threshold(90.5, 300, THRESH_BINARY)),
    case("gaussian-3-sigma0", lambda: it().gaussianKernel(3, 0.0)),
    case("gaussian-7", lambda: it().gaussianKernel(7, 2.5)),
    # normalize: mean and std are in RGB order whatever the image's; alpha is left as is
    case("normalize-BGR-3", lambda: it().normalize(*IMAGENET, 1 / 255), NORMALIZE_3),
    case(
        "normalize-RGB-3",
        lambda: it().colorFormat("RGB").normalize(*IMAGENET, 1 / 255),
        two_cannot("RGB"),
    ),
    case("normalize-BGR-1", lambda: it().normalize([0.5], [0.25], 1 / 255), two_cannot("RGB")),
    case(
        "normalize-RGB-1",
        lambda: it().colorFormat("RGB").normalize([0.5], [0.25], 1 / 255),
        two_cannot("RGB"),
    ),
    case(
        "normalize-scale-1-image",
        lambda: it(toTensor=False).normalize([10.0, 20.0, 30.0], [2.0, 4.0, 8.0], 1.0),
        NORMALIZE_3,
    ),
    case(
        "normalize-BGR-tensor",
        lambda: it(toTensor=True, tensorChannelOrder="BGR").normalize(*IMAGENET, 1 / 255),
        NORMALIZE_3,
    ),
    case(
        "normalize-1-gray-tensor",
        lambda: it().colorFormat("GRAY").normalize([0.5], [0.25], 1 / 255),
        two_cannot("GRAY"),
    ),
    # letterbox: portrait, landscape and square inputs; the scaled size rounds half to even
    case("letterbox-default-pad", lambda: it().letterbox(32)),
    case("letterbox-no-resize", lambda: it().letterbox(64, padValue=7.5)),
    case("letterbox-saturating-pad", lambda: it().letterbox(40, padValue=300.0)),
    case("letterbox-negative-pad", lambda: it().letterbox(20, padValue=-5.0)),
    # tensors: channel order, metadata, gray tensors, shapes known and unknown
    case("tensor-RGB", lambda: it(toTensor=True), two_cannot("RGB")),
    case("tensor-BGR", lambda: it(toTensor=True, tensorChannelOrder="BGR"), two_cannot("BGR")),
    case(
        "tensor-bgr-lowercase",
        lambda: it(toTensor=True, tensorChannelOrder="bgr"),
        two_cannot("BGR"),
    ),
    case("tensor-GRAY", lambda: it(toTensor=True).colorFormat("GRAY"), two_cannot("GRAY")),
    case(
        "tensor-GRAY-then-RGB",
        lambda: it(toTensor=True).colorFormat("GRAY").colorFormat("RGB"),
        two_cannot("GRAY"),
    ),
    case(
        "tensor-fixed-shape",
        lambda: it(toTensor=True).resize(size=40, keepAspectRatio=True).centerCrop(32, 32),
        two_cannot("RGB"),
    ),
    case(
        "tensor-unknown-shape",
        lambda: it(toTensor=True).resize(20, 30).resize(size=16, keepAspectRatio=True),
        two_cannot("RGB"),
    ),
    # chains of several operations
    case(
        "chain-model-input",
        lambda: (
            it()
            .resize(size=40, keepAspectRatio=True)
            .centerCrop(32, 32)
            .colorFormat("RGB")
            .normalize(*IMAGENET, 1 / 255)
        ),
        two_cannot("RGB"),
    ),
    case(
        "chain-pixelwise",
        lambda: (
            it()
            .flip(1)
            .crop(1, 2, 10, 11)
            .blur(3, 3)
            .threshold(120, 255, THRESH_TOZERO)
            .gaussianKernel(3, 0.8)
        ),
    ),
    case(
        "chain-gray-letterbox-tensor",
        lambda: it(toTensor=True).colorFormat("GRAY").letterbox(24, padValue=0.0).flip(0),
        two_cannot("GRAY"),
    ),
    # rtol 1e-6: OpenCV's float kernels (resize, GaussianBlur on the normalized float image) may
    # round differently in its two builds (their SIMD paths); everything else is exact.
    case(
        "normalize-then-resize",
        lambda: it().normalize([0.5], [0.25], 1 / 255).resize(20, 30),
        two_cannot("RGB"),
        rtol=1e-6,
    ),
    case(
        "normalize-then-gaussian",
        lambda: it(toTensor=False).normalize([0.5], [0.25], 1 / 255).gaussianKernel(5, 1.2),
        rtol=1e-6,
    ),
]


def _check_tensor_metadata(stage: ImageTransformer, df: DataFrame) -> None:
    """A tensor output names its shape and channel order (so agreement is not on an absence)."""
    if stage.getToTensor():
        metadata = df.schema[stage.getOutputCol()].metadata
        assert set(metadata) == {"tensorShape", "tensorChannelOrder"}, metadata
        assert metadata["tensorChannelOrder"] in ("RGB", "BGR", "GRAY")


@pytest.mark.parametrize("make, errors, rtol", STRUCT_CASES)
def test_image_transformer_on_image_structs(structs, make, errors, rtol):
    df, n = structs
    jvm, py = both(make, df)
    _check_tensor_metadata(make(), jvm)
    assert_same(
        jvm,
        py,
        rows=n,
        error_col="transformError",
        output_col="transformed",
        errors={**NULL_IMAGE, **errors},
        rtol=rtol,
    )


@pytest.mark.parametrize(
    "make, errors, rtol",
    [
        case("shorter-3", lambda: it().resize(size=3, keepAspectRatio=True)),
        case(
            "shorter-5-area",
            lambda: it().resize(size=5, keepAspectRatio=True, interpolation=INTER_AREA),
        ),
        case("letterbox-4", lambda: it().letterbox(4)),
        case("letterbox-3-pad", lambda: it().letterbox(3, padValue=9.0)),
        case("letterbox-8-tensor", lambda: it(toTensor=True).letterbox(8)),
    ],
)
def test_image_transformer_rounds_sizes_like_the_jvm(tiny, make, errors, rtol):
    """resizeShorter rounds the longer side half up (Math.round), letterbox rounds the scaled
    size half to even (rint) and keeps at least one pixel: 4x6 to a shorter side of 3 is 3x5."""
    df, n = tiny
    jvm, py = both(make, df)
    rows = assert_same(
        jvm, py, rows=n, error_col="transformError", output_col="transformed", errors=errors
    )
    if make().getOps() == [{"op": "resizeShorter", "size": 3, "interpolation": INTER_LINEAR}]:
        image = rows["4x6"]["transformed"]
        assert (image["height"], image["width"]) == (3, 5)  # 6 * 3 / 4 = 4.5 rounds up


ODD_ERRORS = {
    "short": "requirement failed: image data has 10 bytes, expected 48",
    "f64": "unsupported image mode 6 (CV_64FC1)",
    **NULL_IMAGE,
}


@pytest.mark.parametrize(
    "make, errors, rtol",
    [
        case("as-is", lambda: it()),
        case("tensor", lambda: it(toTensor=True)),
        # rtol 1e-6: resizing a float image runs OpenCV's float kernel (see STRUCT_CASES)
        case("float-resize", lambda: it().resize(5, 6), rtol=1e-6),
    ],
)
def test_image_transformer_on_float_and_malformed_structs(odd_structs, make, errors, rtol):
    df, n = odd_structs
    jvm, py = both(make, df)
    assert_same(
        jvm,
        py,
        rows=n,
        error_col="transformError",
        output_col="transformed",
        errors=ODD_ERRORS,
        rtol=rtol,
    )


@pytest.mark.parametrize(
    "make, errors, rtol",
    [
        case("area-flip", lambda: it().resize(10, 12, interpolation=INTER_AREA).flip(1)),
        case("GRAY", lambda: it().colorFormat("GRAY")),
        case("RGB-tensor", lambda: it(toTensor=True).colorFormat("RGB")),
        case("normalize-16-bit", lambda: it().normalize([0.5], [0.25], 1 / 65535)),
        case(
            "letterbox-threshold",
            lambda: it().letterbox(24, padValue=1000.0).threshold(30000, 65535, THRESH_BINARY),
        ),
        case("gaussian-centerCrop", lambda: it().gaussianKernel(5, 1.0).centerCrop(15, 15)),
    ],
)
def test_image_transformer_on_unchanged_png_decodes(unchanged16, make, errors, rtol):
    """16-bit gray, BGR and BGRA images (and 8-bit ones) as ImageDecoder's unchanged mode gives
    them: samples stay 16-bit through the operations, pads and thresholds saturate per depth."""
    df, n = unchanged16
    jvm, py = both(make, df)
    assert_same(
        jvm, py, rows=n, error_col="transformError", output_col="transformed", errors=errors
    )


# -- ImageTransformer on encoded bytes ----------------------------------------------------------

ENCODED_NAMES = [
    "color.jpg",
    "rotated6.jpg",
    "progressive.jpg",
    "cmyk.jpg",
    "color.png",
    "gray.png",
    "alpha.png",
    "deep16.png",
    "color.webp",
    "missing.jpg",
    "empty.jpg",
    "notes.jpg",
    "halved.jpg",
]
ENCODED_ERRORS = {
    "missing.jpg": "no input image (null)",  # not ImageDecoder's "no data (null)"
    "empty.jpg": "empty file (0 bytes)",
    "notes.jpg": "not a decodable image (34 bytes starting 66 69 65 6c)",
    "halved.jpg": "truncated JPEG: no end-of-image marker in ",
}


def _model_chain(reduced: bool) -> ImageTransformer:
    return (
        it(inputCol="content", reducedDecode=reduced)
        .resize(size=20, keepAspectRatio=True)
        .centerCrop(16, 16)
        .normalize(*IMAGENET, 1 / 255)
    )


@pytest.mark.parametrize(
    "make, errors, rtol",
    [
        case("decode-only-image", lambda: it(inputCol="content")),
        case("decode-only-tensor", lambda: it(inputCol="content", toTensor=True)),
        # 48x64 JPEGs decode at 1/2 for 20x30; the 64x48 of rotated6.jpg at full size
        case("resize-reduced", lambda: it(inputCol="content").resize(20, 30)),
        case("resize-full", lambda: it(inputCol="content", reducedDecode=False).resize(20, 30)),
        case(
            "flip-resize-reduced-tensor",
            lambda: it(inputCol="content", toTensor=True).flip(1).resize(20, 30),
        ),
        case(
            "shorter-reduced-tensor",
            lambda: it(inputCol="content", toTensor=True).resize(size=16, keepAspectRatio=True),
        ),
        # a crop first is in full-size pixels: no reduced decode
        case("crop-then-resize", lambda: it(inputCol="content").crop(1, 2, 10, 11).resize(8, 8)),
        case(
            "letterbox-reduced-BGR",
            lambda: it(inputCol="content", toTensor=True, tensorChannelOrder="BGR").letterbox(16),
        ),
        case("model-chain-reduced", lambda: _model_chain(True)),
        case("model-chain-full", lambda: _model_chain(False)),
    ],
)
def test_image_transformer_on_encoded_bytes(encoded, make, errors, rtol):
    df, n = subset(encoded, ENCODED_NAMES)
    jvm, py = both(make, df)
    _check_tensor_metadata(make(), jvm)
    rows = assert_same(
        jvm,
        py,
        rows=n,
        error_col="transformError",
        output_col="transformed",
        errors={**ENCODED_ERRORS, **errors},
        rtol=rtol,
    )
    if not make().getToTensor():  # decoded bytes have no origin
        assert {r["transformed"]["origin"] for r in rows.values() if r["transformed"]} == {None}


# -- UnrollImage --------------------------------------------------------------------------------


@pytest.mark.parametrize("frame, errors", [("structs", NULL_IMAGE), ("odd_structs", ODD_ERRORS)])
def test_unroll_image(request, frame, errors):
    df, n = request.getfixturevalue(frame)
    jvm, py = both(lambda: UnrollImage(), df)
    assert_same(jvm, py, rows=n, error_col="unrollError", output_col="unrolled", errors=errors)


# -- the pixel limit ----------------------------------------------------------------------------

LIMIT = 250_000  # 0.25 MP, which the JVM writes "0.3 MP" (String.format rounds half up)
REFUSED = "over the limit of 0.3 MP per image on this executor; decode it smaller"
OVER = "over the limit of 0.3 MP per image on this executor; raise spark.mmlspark.image.maxPixels"
BIG_PNGS = ["big.png", "big16.png", "bigalpha.png", "biggray.png"]
# A PNG cannot be decoded smaller with reduceFactor: the message names only what works for it.
PNG_REFUSED = {
    name: "image is 600x500 (0.3 MP), over the limit of 0.3 MP per image on this executor; decode "
    "it smaller (minHeight and minWidth where the image is resized after: a PNG is then read "
    "subsampled; reduceFactor cannot shrink it as it is read), give the executors more memory, "
    "or raise spark.mmlspark.image.maxPixels"
    for name in BIG_PNGS
}
CLAIMS_REFUSED = {
    "claims-3000x2000.jpg": f"image is 3000x2000 (6.0 MP), {REFUSED}",
    "claims-2000x700.jpg": f"image is 2000x700 (1.4 MP), {REFUSED}",
}
CLAIMS_REFUSED_AT_HALF = {
    "claims-3000x2000.jpg": f"image is 3000x2000 (6.0 MP) (1.5 MP at 1/2 scale), {REFUSED}",
    # 1000x350 is 0.35 MP: "0.4" in the JVM's rounding, "0.3" in Python's "%.1f"
    "claims-2000x700.jpg": f"image is 2000x700 (1.4 MP) (0.4 MP at 1/2 scale), {REFUSED}",
}
NOT_CLAIMS = [*BIG_PNGS, "small.jpg", "small.webp", "missing.jpg"]


@pytest.fixture(scope="module")
def oversized(spark) -> tuple[DataFrame, int]:
    """Headers over a 0.25 MP limit (JPEGs of 16x16 pixels claiming more, PNGs of 600x500 in 8 and
    16 bits, gray, BGR and BGRA) and small images under it."""
    big = gradient(500, 600)
    files: dict[str, bytes | None] = {
        "claims-3000x2000.jpg": jpeg_claiming(3000, 2000),
        "claims-2000x700.jpg": jpeg_claiming(2000, 700),
        "big.png": encode(big, ".png"),
        "big16.png": encode(big.astype(np.uint16) * 257, ".png"),
        "bigalpha.png": encode(np.dstack([big, gradient(500, 600, 1)]), ".png"),
        "biggray.png": encode(gradient(500, 600, 1)[..., 0], ".png"),
        "small.jpg": encode(COLOR, ".jpg"),
        "small.webp": encode(COLOR, ".webp"),
        "missing.jpg": None,
    }
    return encoded_frame(spark, files)


@pytest.mark.parametrize(
    "params, names, errors",
    [
        pytest.param({}, None, {**CLAIMS_REFUSED, **PNG_REFUSED}, id="full-size"),
        pytest.param(
            {"reduceFactor": 2}, None, {**CLAIMS_REFUSED_AT_HALF, **PNG_REFUSED}, id="reduce2"
        ),
        # Over the limit with a minimum size, unchanged mode never subsamples (color and
        # grayscale do on the JVM only: test_subsampled_decode_is_the_jvm_backends_alone).
        pytest.param(
            {"colorMode": "unchanged", "minHeight": 100, "minWidth": 100},
            NOT_CLAIMS,
            PNG_REFUSED,
            id="min-100-unchanged",
        ),
    ],
)
def test_image_decoder_pixel_limit(spark, oversized, params, names, errors):
    df, n = oversized if names is None else subset(oversized, names)
    with pixel_limit(spark, LIMIT):
        jvm, py = both(lambda: ImageDecoder(originCol="path", **params), df)
        assert_same(
            jvm,
            py,
            rows=n,
            error_col="error",
            output_col="image",
            errors={"missing.jpg": "no data (null)", **errors},
        )


@pytest.fixture(scope="module")
def limit_structs(spark) -> tuple[DataFrame, int]:
    images = {"landscape": IMAGES["landscape"], "big": gradient(500, 600), "null": None}
    return struct_frame(spark, images)


@pytest.mark.parametrize(
    "make, errors, rtol",
    [
        # a fixed output size is refused before the operation runs; sizes read width x height
        case(
            "resize-1000",
            lambda: it().resize(1000, 1000),
            {
                n: f"resize would make a 1000x1000 image (1.0 MP), {OVER}"
                for n in ("landscape", "big")
            },
        ),
        case(
            "resize-700x500",
            lambda: it().resize(700, 500),
            {
                n: f"resize would make a 500x700 image (0.4 MP), {OVER}"
                for n in ("landscape", "big")
            },
        ),
        case(
            "letterbox-600",
            lambda: it().letterbox(600),
            {
                n: f"letterbox would make a 600x600 image (0.4 MP), {OVER}"
                for n in ("landscape", "big")
            },
        ),
        # other sizes are checked after the operation, under the registry's name of the op
        case(
            "shorter-600",
            lambda: it().resize(size=600, keepAspectRatio=True),
            {
                "landscape": f"resizeShorter would make a 800x600 image (0.5 MP), {OVER}",
                "big": f"resizeShorter would make a 720x600 image (0.4 MP), {OVER}",
            },
        ),
        # an input image already over the limit fails the first operation, even a flip...
        case(
            "flip",
            lambda: it().flip(1),
            {"big": f"flip would make a 600x500 image (0.3 MP), {OVER}"},
        ),
        # ... but passes when there is none
        case("no-operations", lambda: it()),
        case("resize-under-the-limit", lambda: it().resize(400, 500)),
    ],
)
def test_image_transformer_pixel_limit_on_image_structs(spark, limit_structs, make, errors, rtol):
    df, n = limit_structs
    with pixel_limit(spark, LIMIT):
        jvm, py = both(make, df)
        assert_same(
            jvm,
            py,
            rows=n,
            error_col="transformError",
            output_col="transformed",
            errors={**NULL_IMAGE, **errors},
        )


@pytest.mark.parametrize(
    "make, names, errors",
    [
        pytest.param(
            lambda: it(inputCol="content", reducedDecode=False).resize(20, 30),
            None,
            {**CLAIMS_REFUSED, **PNG_REFUSED},
            id="full-decode-refused",
        ),
        # with the reduced decode, the first resize's size is the minimum: PNGs over the limit
        # are read subsampled on the JVM only (test_subsampled_decode_is_the_jvm_backends_alone)
    ],
)
def test_image_transformer_pixel_limit_on_encoded_bytes(spark, oversized, make, names, errors):
    df, n = oversized if names is None else subset(oversized, names)
    with pixel_limit(spark, LIMIT):
        jvm, py = both(make, df)
        assert_same(
            jvm,
            py,
            rows=n,
            error_col="transformError",
            output_col="transformed",
            errors={"missing.jpg": "no input image (null)", **errors},
        )


def test_the_default_pixel_limit_refuses_alike(structs):
    """Unset, the limit is a share of the executor's heap, which the Python workers cannot know
    to the byte: the texts must agree but for that number."""
    df, n = structs
    message = "resize would make a 100000x100000 image (10000.0 MP), over the limit of "
    errors = {name: message for name, image in IMAGES.items() if image is not None}
    jvm, py = both(lambda: it().resize(100000, 100000), df)
    rows = assert_same(
        jvm,
        py,
        rows=n,
        error_col="transformError",
        output_col="transformed",
        errors={**NULL_IMAGE, **errors},
        error_text=lambda text: re.sub(r"over the limit of \S+ MP", "over the limit of N MP", text),
    )
    assert rows["landscape"]["transformError"].endswith(
        " MP per image on this executor; raise spark.mmlspark.image.maxPixels"
    )


@pytest.mark.parametrize(
    "make, columns, size, minimum",
    [
        (
            lambda: ImageDecoder(originCol="path", minHeight=100, minWidth=100),
            ("image", "error"),
            (100, 120),
            "100x100",
        ),
        (
            lambda: ImageDecoder(
                originCol="path", colorMode="grayscale", minHeight=100, minWidth=100
            ),
            ("image", "error"),
            (100, 120),
            "100x100",
        ),
        (
            lambda: it(inputCol="content").resize(20, 30),
            ("transformed", "transformError"),
            (20, 30),
            "20x30",
        ),
    ],
    ids=["decoder-color", "decoder-grayscale", "transformer-reduced-decode"],
)
def test_subsampled_decode_is_the_jvm_backends_alone(
    spark, oversized, make, columns, size, minimum
):
    """Over the limit with a minimum size (given, or the first resize's with the reduced decode),
    the JVM reads a PNG keeping every n-th pixel of every n-th row (the largest step that still
    covers it); the Python backend, whose OpenCV decodes a PNG only whole, refuses it and says
    so. Every other row agrees."""
    df, n = subset(oversized, NOT_CLAIMS)
    output, error = columns
    with pixel_limit(spark, LIMIT):
        jvm, py = both(make, df)
        expected = {r["path"].rsplit("/", 1)[-1]: r for r in jvm.collect()}
        got = {r["path"].rsplit("/", 1)[-1]: r for r in py.collect()}
    assert len(expected) == len(got) == n
    for name in BIG_PNGS:
        image = expected[name][output]
        assert expected[name][error] is None and (image.height, image.width) == size
        assert got[name][output] is None
        assert got[name][error] == (
            "image is 600x500 (0.3 MP), over the limit of 0.3 MP per image on this executor; "
            f"the Python backend decodes a PNG whole (the JVM backend reads it subsampled to "
            f"{minimum}): give the executors more memory, or raise spark.mmlspark.image.maxPixels"
        )
    for name in set(expected) - set(BIG_PNGS):
        assert got[name] == expected[name], name


def test_the_python_workers_pixel_limit_follows_the_memory_they_really_have(tmp_path, monkeypatch):
    """In a container on a large host the worker's limit comes from its cgroup (memory.max and
    cpu.max, as the kernel shows them), or from Spark's per-worker share of
    spark.executor.pyspark.memory: never from the host's RAM and core count."""
    from mmlspark._engine import files as engine_files

    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    monkeypatch.delenv("PYSPARK_EXECUTOR_MEMORY_MB", raising=False)
    monkeypatch.setattr(engine_files, "CGROUP_ROOT", tmp_path)
    (tmp_path / "memory.max").write_text("3221225472\n")  # 3 GiB
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs: two task threads
    assert 3 * 2**30 < host  # the container is smaller than this host
    assert engine_files.max_pixels(None) == int(3 * 2**30 * 0.6 / 2 / 30)
    (tmp_path / "memory.max").write_text("max\n")  # no memory limit: the host's
    (tmp_path / "cpu.max").write_text("max 100000\n")
    cpus = len(os.sched_getaffinity(0))
    assert engine_files.max_pixels(None) == int(host * 0.6 / cpus / 30)
    # Spark's share per worker of spark.executor.pyspark.memory wins over both.
    monkeypatch.setenv("PYSPARK_EXECUTOR_MEMORY_MB", "512")
    assert engine_files.max_pixels(None) == int(512 * 2**20 * 0.6 / 30)
    assert engine_files.max_file_bytes(None) == int(512 * 2**20 * 0.6 / 4)
    assert engine_files.max_pixels("1000") == 1000  # the setting, where given, decides


def test_the_engine_takes_operations_fields_and_defaults_from_the_generated_registry():
    """The Python engine keeps no operation vocabulary of its own: the fields, their order and
    defaults come from the registry codegen writes from the JVM's (OPERATIONS), which the
    driver hands it; an operation or default the registry does not have does not exist."""
    import copy
    import json

    from mmlspark._engine.ops import parse_ops
    from mmlspark.opencv._ImageOps import OPERATIONS

    text = json.dumps([{"op": "letterbox", "size": 8}, {"op": "flip"}])
    letterbox, flip = parse_ops(text, OPERATIONS)
    assert letterbox.args == {
        "size": 8,
        "padValue": OPERATIONS["letterbox"]["defaults"]["padValue"],
    }
    assert flip.args == {"flipCode": 1}
    changed = copy.deepcopy(OPERATIONS)
    changed["letterbox"]["defaults"]["padValue"] = 0.0
    del changed["flip"]
    assert parse_ops(text[: text.index(", {")] + "]", changed)[0].args["padValue"] == 0.0
    with pytest.raises(ValueError, match="unknown image operation 'flip'; known: resize"):
        parse_ops(text, changed)
