"""Golden cases of the image operations, read by both engines' suites: this file and the JVM's
``GoldenImageOpsSuite`` read ``scala/src/test/resources/golden/image_ops.json``, so that neither
engine is the other's oracle.

- ``refused``: operations that validation refuses, with the message each must give (written by
  hand from the rules' meaning: a value as Java prints it).
- ``decode``: encoded bytes (base64) with decode settings, and the message the row gets.
- ``pixels``: chains of operations on one synthetic image, with the SHA-256 of the output's bytes
  (row-major, channels interleaved; float32 little-endian where the output is float). Here each
  digest is recomputed from opencv-python and numpy called directly (``reference``), which proves
  the file, and from the Python engine; the JVM suite checks its engine against the same digests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from mmlspark._engine.decode import decode
from mmlspark._engine.ops import Image, apply, parse_ops
from mmlspark._engine.rows import RowError
from mmlspark.opencv._ImageOps import OPERATIONS

GOLDEN = Path(__file__).resolve().parent.parent / "scala/src/test/resources/golden/image_ops.json"
CASES = json.loads(GOLDEN.read_text(encoding="utf-8"))


def golden_input(height: int, width: int) -> np.ndarray:
    """The input of every pixel case: BGR, ``(7y + 13x + 29c) mod 256``."""
    y, x, c = np.indices((height, width, 3))
    return ((7 * y + 13 * x + 29 * c) % 256).astype(np.uint8)


def reference(pixels: np.ndarray, order: str, op: dict[str, Any]) -> tuple[np.ndarray, str]:
    """One operation done with opencv-python or numpy directly, as its doc says it works."""
    name = op["op"]
    if name == "resize":
        size = (op["width"], op["height"])
        return cv2.resize(pixels, size, interpolation=op.get("interpolation", 1)), order
    if name == "resizeShorter":
        h, w = pixels.shape[:2]
        scale, size = op["size"] / min(h, w), op["size"]
        # the longer side, rounded half up, as Java's Math.round
        out = (math.floor(w * scale + 0.5), size) if h <= w else (size, math.floor(h * scale + 0.5))
        return cv2.resize(pixels, out, interpolation=op.get("interpolation", 1)), order
    if name == "crop":
        x, y = op["x"], op["y"]
        return pixels[y : y + op["height"], x : x + op["width"]], order
    if name == "centerCrop":
        h, w = pixels.shape[:2]
        y, x = (h - op["height"]) // 2, (w - op["width"]) // 2
        return pixels[y : y + op["height"], x : x + op["width"]], order
    if name == "colorFormat":
        target = op["format"].upper()
        if target == "GRAY":
            code = cv2.COLOR_BGR2GRAY if order == "BGR" else cv2.COLOR_RGB2GRAY
            return cv2.cvtColor(pixels, code), "GRAY"
        return (pixels if target == order else pixels[..., ::-1]), target
    if name == "flip":
        return cv2.flip(pixels, op.get("flipCode", 1)), order
    if name == "blur":
        return cv2.blur(pixels, (op["width"], op["height"])), order
    if name == "threshold":
        return cv2.threshold(pixels, op["threshold"], op["maxVal"], op["thresholdType"])[1], order
    if name == "gaussianKernel":
        k = op["apertureSize"]
        return cv2.GaussianBlur(pixels, (k, k), op["sigma"]), order
    if name == "normalize":
        channels = 1 if pixels.ndim == 2 else pixels.shape[2]
        mean = op["mean"] * channels if len(op["mean"]) == 1 else op["mean"]
        std = op["std"] * channels if len(op["std"]) == 1 else op["std"]
        if order == "BGR":
            mean, std = mean[::-1], std[::-1]
        scaled = pixels.astype(np.float32).reshape(pixels.shape[0], pixels.shape[1], channels)
        scale = np.float32(op.get("colorScaleFactor", 1.0))
        out = (scaled * scale - np.array(mean, np.float32)) / np.array(std, np.float32)
        return out.reshape(pixels.shape), order
    raise AssertionError(f"no reference for {name}")


def digest(pixels: np.ndarray) -> str:
    little = np.ascontiguousarray(pixels).astype(pixels.dtype.newbyteorder("<"))
    return hashlib.sha256(little.tobytes()).hexdigest()


def shape_of(pixels: np.ndarray) -> list[int]:
    return [pixels.shape[0], pixels.shape[1], 1 if pixels.ndim == 2 else pixels.shape[2]]


@pytest.mark.parametrize("case", CASES["refused"], ids=lambda c: c["error"][:60])
def test_refused_operations_give_the_golden_message_on_python(case):
    with pytest.raises(ValueError) as refused:
        parse_ops(json.dumps(case["operations"]), OPERATIONS)
    assert str(refused.value) == case["error"]


@pytest.mark.parametrize("case", CASES["decode"], ids=lambda c: c["error"][:50])
def test_undecodable_bytes_give_the_golden_message_on_python(case):
    with pytest.raises(RowError) as refused:
        decode(
            base64.b64decode(case["data"]),
            case["colorMode"],
            True,
            case["reduceFactor"],
            case["minHeight"],
            case["minWidth"],
            case["maxPixels"],
        )
    assert str(refused.value) == case["error"]


def test_every_rule_of_every_operation_has_a_refused_case():
    missing = []
    for name, entry in OPERATIONS.items():
        for rule in entry["rules"]:
            prefix = f"{name}: " + re.split(r"\{", rule["message"], maxsplit=1)[0]
            if not any(c["error"].startswith(prefix) for c in CASES["refused"]):
                missing.append(prefix)
    assert not missing, missing


@pytest.mark.parametrize("case", CASES["pixels"], ids=lambda c: json.dumps(c["operations"])[:70])
def test_pixel_cases_hold_for_opencv_python_and_the_python_engine(case):
    source = golden_input(*CASES["input"])
    expected, order = source, "BGR"
    for op in case["operations"]:
        expected, order = reference(expected, order, op)
    assert (digest(expected), shape_of(expected), str(expected.dtype)) == (
        case["sha256"],
        case["shape"],
        case["dtype"],
    )  # the golden file, proved by opencv-python and numpy
    image = Image(source.copy(), "BGR")
    for op in parse_ops(json.dumps(case["operations"]), OPERATIONS):
        image = apply(op, image)
    assert (digest(image.pixels), shape_of(image.pixels), image.order) == (
        case["sha256"],
        case["shape"],
        order,
    )


def test_every_operation_but_letterbox_has_a_pixel_case():
    # letterbox's geometry is checked against tests/detection_reference.py instead
    covered = {op["op"] for case in CASES["pixels"] for op in case["operations"]}
    assert set(OPERATIONS) - covered == {"letterbox"}


def test_row_messages_fill_numbers_as_java_prints_them():
    from mmlspark._engine.messages import row_message

    # 1.25 MP is 1.3 in Java's %.1f (half up), where Python's own rounding gives 1.2.
    assert row_message(
        "opOverLimit", op="resize", width=1250, height=1000, pixels=1_250_000, limit=10**6, key="k"
    ) == (
        "resize would make a 1250x1000 image (1.3 MP), over the limit of 1.0 MP per image on "
        "this executor; raise k"
    )
    assert row_message("fileOverLimit", size=1572864, limit=1048576, key="k").startswith(
        "file is 1.5 MB, over the limit of 1.0 MB per file"
    )
    with pytest.raises(ValueError, match=r"no value for \{column\}"):
        row_message("nullInput")
