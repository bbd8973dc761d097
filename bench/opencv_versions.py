"""How much the Python backend's image results depend on the OpenCV version: the image engine
(mmlspark/_engine, loaded from its folder, so any Python with numpy and opencv-python runs it)
decodes and transforms fixed photos (JPEG and PNG, 640x480 to 12 MP; full and reduced decodes;
every interpolation of resize, the ImageNet chain, letterbox, gray + blur + threshold) and saves
the results; `compare` reports the largest difference and the share of differing values against
a reference run. With the reference made under the jar's OpenCV (4.9, bit-exact with the JVM
backend by tests/test_python_images.py), that is the difference from the JVM backend. Not a test.

Usage:
  python bench/opencv_versions.py inputs INPUTS.npz          # the encoded photos, made once
  python bench/opencv_versions.py run INPUTS.npz OUT.npz      # under each OpenCV to compare
  python bench/opencv_versions.py compare REF.npz OTHER.npz ...
"""

from __future__ import annotations

import collections
import functools
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

CHAINS = {
    "decode": [],
    "resize224-linear": [{"op": "resize", "height": 224, "width": 224}],
    "resize224-area": [{"op": "resize", "height": 224, "width": 224, "interpolation": 3}],
    "resize224-cubic": [{"op": "resize", "height": 224, "width": 224, "interpolation": 2}],
    "resize224-lanczos": [{"op": "resize", "height": 224, "width": 224, "interpolation": 4}],
    "imagenet": [
        {"op": "resizeShorter", "size": 256},
        {"op": "centerCrop", "height": 224, "width": 224},
        {
            "op": "normalize",
            "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225],
            "colorScaleFactor": 1 / 255,
        },
    ],
    "letterbox640": [{"op": "letterbox", "size": 640}],
    "gray-blur-threshold": [
        {"op": "colorFormat", "format": "gray"},
        {"op": "gaussianKernel", "apertureSize": 5, "sigma": 1.5},
        {"op": "blur", "height": 3, "width": 3},
        {"op": "threshold", "threshold": 100, "maxVal": 255, "thresholdType": 0},
    ],
}


def _engine() -> types.SimpleNamespace:
    """The image engine's functions, loaded from its folder: the engine imports nothing of
    mmlspark but itself, so the package it sits in is a stand-in here (no pyspark needed)."""
    package = types.ModuleType("mmlspark")
    package.__path__ = [str(ROOT / "mmlspark")]
    sys.modules.setdefault("mmlspark", package)
    decode = importlib.import_module("mmlspark._engine.decode")
    ops = importlib.import_module("mmlspark._engine.ops")
    structs = importlib.import_module("mmlspark._engine.structs")
    # The generated operation registry the driver hands parse_ops (it imports only typing).
    spec = importlib.util.spec_from_file_location(
        "_image_ops", ROOT / "mmlspark" / "opencv" / "_ImageOps.py"
    )
    assert spec is not None and spec.loader is not None
    registry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(registry)
    return types.SimpleNamespace(
        parse_ops=functools.partial(ops.parse_ops, registry=registry.OPERATIONS),
        reduced_decode_target=ops.reduced_decode_target,
        run_ops=ops.run_ops,
        Image=ops.Image,
        decode=decode.decode,
        order_of=structs.order_of,
    )


def _photo(height: int, width: int, seed: int) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (height // 16 + 2, width // 16 + 2, 3), dtype=np.uint8)
    img = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
    grain = rng.integers(-12, 13, img.shape)
    return np.clip(img.astype(np.int16) + grain, 0, 255).astype(np.uint8)


def make_inputs(out: str) -> None:
    import cv2

    encoded = {}
    for i, (h, w) in enumerate([(480, 640), (3000, 4000), (375, 500), (1001, 777)]):
        _, jpeg = cv2.imencode(".jpg", _photo(h, w, i), [cv2.IMWRITE_JPEG_QUALITY, 90])
        _, png = cv2.imencode(".png", _photo(h, w, i + 10))
        encoded[f"jpg{i}"], encoded[f"png{i}"] = jpeg.reshape(-1), png.reshape(-1)
    np.savez(out, **encoded)


def run(inputs: str, out: str) -> None:
    import cv2

    cv = _engine()
    results = {}
    for name, data in np.load(inputs).items():
        for reduced in (False, True):
            for chain, spec in CHAINS.items():
                ops = cv.parse_ops(json.dumps(spec))
                h, w = (cv.reduced_decode_target(ops) if reduced else None) or (0, 0)
                image = cv.decode(data.tobytes(), "color", True, 1, h, w, 10**9)
                done = cv.run_ops(ops, cv.Image(image, cv.order_of(image)), 10**9)
                results[f"{name}|{'reduced' if reduced else 'full'}|{chain}"] = done.pixels
    np.savez(out, **results)
    print(f"OpenCV {cv2.__version__}: {len(results)} results in {out}")


def compare(reference: str, others: list[str]) -> None:
    ref = np.load(reference)
    for other in others:
        got = np.load(other)
        worst: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
        for key in ref.files:
            a, b, w = ref[key], got[key], worst[key.split("|", 1)[1]]
            if a.shape != b.shape:
                w[2] += 1
                continue
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            w[0], w[1] = max(w[0], float(diff.max())), max(w[1], float((diff > 0).mean()))
        print(f"{other} against {reference} ({len(ref.files)} results):")
        for chain, (most, share, shapes) in sorted(worst.items()):
            print(f"  {chain:30s} max |diff| {most:g}, differing {share:.2%}, shapes {shapes:g}")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"inputs": lambda: make_inputs(args[0]), "run": lambda: run(args[0], args[1])}.get(
        command, lambda: compare(args[0], args[1:])
    )()
