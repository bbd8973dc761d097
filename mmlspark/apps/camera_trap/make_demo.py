"""Makes the camera-trap demo's embedded data: synthetic photos and a featurizer model.

Nothing here is real wildlife data or a trained network. The photos are drawn in code: a
textured, randomly lit "vegetation" background, and for the animal classes a body, head and legs
in the class's coat colour and build, at a random place and size; `empty` has none. The
featurizer is a small CNN with seeded random weights (two 3x3 convolutions with ReLU, global
average pooling to 32 features named `features`, and a random 3-way head): random convolutional
features are enough to tell these classes apart, which is all a demo needs. Run by maintainers
(it needs opencv-python and onnx); the output is committed next to this file:

    python -m mmlspark.apps.camera_trap.make_demo
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent / "demo_data"
CLASSES = {"deer": (60, 95, 140), "fox": (30, 110, 225), "empty": None}  # BGR coat colours
PER_CLASS = 40
SIZE = 96


def background(rng: np.random.Generator, height: int, width: int) -> tuple[np.ndarray, float]:
    """Textured, randomly lit "vegetation" (BGR), and the light factor the animal shares."""
    y, x = np.mgrid[0:height, 0:width]
    light = rng.uniform(0.6, 1.2)
    base = np.stack(
        [
            40 + 30 * np.sin(x / rng.uniform(3, 9)),
            90 + 40 * np.cos(y / rng.uniform(4, 11)),
            50 + 0 * x,
        ],
        axis=-1,
    )
    img = np.clip((base + rng.normal(0, 18, base.shape)) * light, 0, 255).astype(np.uint8)
    return img, light


def photo(rng: np.random.Generator, coat: tuple[int, int, int] | None) -> np.ndarray:
    import cv2

    img, light = background(rng, SIZE, SIZE)
    if coat is not None:
        scale = rng.uniform(0.7, 1.3) * (1.0 if coat[2] < 200 else 0.7)  # foxes are smaller
        cx, cy = int(rng.integers(30, 66)), int(rng.integers(40, 70))
        w, h = int(22 * scale), int(12 * scale)
        colour = tuple(int(np.clip(c * light + rng.normal(0, 10), 0, 255)) for c in coat)
        cv2.ellipse(img, (cx, cy), (w, h), 0, 0, 360, colour, -1)
        cv2.circle(img, (cx + w, cy - h), max(3, int(8 * scale)), colour, -1)
        for dx in (-w + 4, -w // 3, w // 3, w - 4):
            cv2.line(img, (cx + dx, cy + h - 2), (cx + dx, cy + h + int(14 * scale)), colour, 2)
    return img


DETECTION_SIZE = (192, 256)  # height, width of the detection part's photos
# The detection photos' coats: the deer a little redder than in the classification photos, so
# that the synthetic detector's colour rule holds in the dimmest light too.
DETECTION_COATS = {"deer": (50, 85, 165), "fox": (30, 110, 225), "empty": None}
DETECTOR_INPUT = 128
PER_CLASS_DETECTION = 16


def detection_photo(
    rng: np.random.Generator, coat: tuple[int, int, int] | None
) -> tuple[np.ndarray, list[int] | None]:
    """A 256x192 photo like `photo`'s with one stockier animal (thick legs) at a random place and
    size, and its bounding box [x, y, width, height] in pixels, read off the drawn pixels."""
    import cv2

    height, width = DETECTION_SIZE
    img, light = background(rng, height, width)
    if coat is None:
        return img, None
    mask = np.zeros((height, width), np.uint8)
    scale = rng.uniform(0.9, 1.8) * (1.0 if coat[2] < 200 else 0.7)
    w, h = int(22 * scale), int(12 * scale)
    cx = int(rng.integers(w + 8, width - w - 20))
    cy = int(rng.integers(h + 16, height - h - int(16 * scale) - 4))
    cv2.ellipse(mask, (cx, cy), (w, h), 0, 0, 360, (255,), -1)
    cv2.circle(mask, (cx + w, cy - h), max(3, int(8 * scale)), (255,), -1)
    for dx in (-w + 4, -w // 3, w // 3, w - 4):
        cv2.line(mask, (cx + dx, cy + h - 2), (cx + dx, cy + h + int(12 * scale)), (255,), 4)
    colour = np.array([np.clip(c * light + rng.normal(0, 10), 0, 255) for c in coat])
    img[mask > 0] = colour.astype(np.uint8)
    ys, xs = np.nonzero(mask)
    box = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)]
    return img, box


def detector() -> bytes:
    """A synthetic animal detector in the YOLOv5 output layout (MegaDetector's classes): images
    [N, 3, 128, 128] (RGB / 255) -> output0 [N, 1, 8], one box per image. No learned weights:
    a pixel is "animal" where its 3x3 mean is redder than green by 0.06 (the drawn coats are,
    the vegetation is not); the box spans the columns and rows holding at least 2 such pixels,
    its objectness rises with their count (0.5 at 40 pixels), and its class is animal."""
    from onnx import TensorProto, helper, numpy_helper

    def const(name: str, values: Any, dtype: Any = np.float32) -> Any:
        return numpy_helper.from_array(np.array(values, dtype), name)

    s = DETECTOR_INPUT
    nodes = [
        helper.make_node(
            "AveragePool",
            ["images"],
            ["smooth"],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            count_include_pad=0,
        ),
        # red - green - 0.06, by a 1x1 convolution over the RGB channels
        helper.make_node("Conv", ["smooth", "redness_w", "redness_b"], ["redness"]),
        helper.make_node("Greater", ["redness", "zero"], ["animal_bool"]),
        helper.make_node("Cast", ["animal_bool"], ["animal"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["animal", "axis_h"], ["per_column"], keepdims=0),
        helper.make_node("ReduceSum", ["animal", "axis_w"], ["per_row"], keepdims=0),
        helper.make_node("Greater", ["per_column", "two"], ["columns_bool"]),
        helper.make_node("Greater", ["per_row", "two"], ["rows_bool"]),
        helper.make_node("Cast", ["columns_bool"], ["columns"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["rows_bool"], ["rows"], to=TensorProto.FLOAT),
        # [N, 1, S] -> first and last index holding 1: the box's extent
        helper.make_node("ArgMax", ["columns"], ["x0"], axis=2, keepdims=0),
        helper.make_node("ArgMax", ["columns"], ["x1"], axis=2, keepdims=0, select_last_index=1),
        helper.make_node("ArgMax", ["rows"], ["y0"], axis=2, keepdims=0),
        helper.make_node("ArgMax", ["rows"], ["y1"], axis=2, keepdims=0, select_last_index=1),
        helper.make_node("Concat", ["x0", "y0", "x1", "y1"], ["corners_i"], axis=1),
        helper.make_node("Cast", ["corners_i"], ["corners"], to=TensorProto.FLOAT),
        # (x0, y0, x1 + 1, y1 + 1) -> (cx, cy, w, h)
        helper.make_node("MatMul", ["corners", "to_xywh"], ["xywh_0"]),
        helper.make_node("Add", ["xywh_0", "xywh_offset"], ["xywh"]),
        helper.make_node("ReduceSum", ["animal", "axis_hw"], ["mass"], keepdims=0),
        helper.make_node("Sub", ["mass", "forty"], ["mass_40"]),
        helper.make_node("Div", ["mass_40", "eight"], ["mass_scaled"]),
        helper.make_node("Sigmoid", ["mass_scaled"], ["objectness"]),
        helper.make_node("Mul", ["objectness", "zero_row"], ["zeros3"]),
        helper.make_node("Add", ["zeros3", "classes"], ["class_scores"]),
        helper.make_node("Concat", ["xywh", "objectness", "class_scores"], ["row"], axis=1),
        helper.make_node("Unsqueeze", ["row", "axis_1"], ["output0"]),
    ]
    to_xywh = np.array(
        [[0.5, 0, -1, 0], [0, 0.5, 0, -1], [0.5, 0, 1, 0], [0, 0.5, 0, 1]], np.float32
    )
    weights = [
        const("redness_w", np.array([1, -1, 0], np.float32).reshape(1, 3, 1, 1)),
        const("redness_b", [-0.06]),
        const("zero", 0.0),
        const("two", 2.0),
        const("forty", 40.0),
        const("eight", 8.0),
        const("axis_h", [2], np.int64),
        const("axis_w", [3], np.int64),
        const("axis_hw", [2, 3], np.int64),
        const("axis_1", [1], np.int64),
        numpy_helper.from_array(to_xywh, "to_xywh"),
        const("xywh_offset", [[0.5, 0.5, 1.0, 1.0]]),
        const("zero_row", [[0.0, 0.0, 0.0]]),
        const("classes", [[1.0, 0.0, 0.0]]),
    ]
    graph = helper.make_graph(
        nodes,
        "camera_trap_demo_detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, s, s])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["N", 1, 8])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def featurizer(seed: int = 0) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name, shape, fan_in):
        values = rng.normal(0, np.sqrt(2 / fan_in), shape).astype(np.float32)
        return numpy_helper.from_array(values, name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["features"], name="pool"),
        helper.make_node("Gemm", ["features", "w3", "b3"], ["logits"], transB=1),
    ]
    weights = [
        weight("w1", (16, 3, 3, 3), 27),
        numpy_helper.from_array(np.zeros(16, np.float32), "b1"),
        weight("w2", (32, 16, 3, 3), 144),
        numpy_helper.from_array(np.zeros(32, np.float32), "b2"),
        weight("w3", (3, 32), 32),
        numpy_helper.from_array(np.zeros(3, np.float32), "b3"),
    ]
    graph = helper.make_graph(
        nodes,
        "camera_trap_demo_featurizer",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def main() -> None:
    import cv2

    rng = np.random.default_rng(2024)
    for name, coat in CLASSES.items():
        folder = HERE / "images" / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(PER_CLASS):
            data = cv2.imencode(".jpg", photo(rng, coat), [cv2.IMWRITE_JPEG_QUALITY, 85])[1]
            (folder / f"{name}_{i:03d}.jpg").write_bytes(data.tobytes())
    (HERE / "featurizer.onnx").write_bytes(featurizer())
    print(f"wrote {len(CLASSES) * PER_CLASS} photos and featurizer.onnx to {HERE}")
    write_detection_part(HERE / "detection")


def write_detection_part(folder: Path) -> None:
    """The detection part: photos with one animal each (or none), their boxes as a COCO Camera
    Traps file (boxes.json, `bbox` in pixels), and the synthetic detector."""
    import json

    import cv2

    rng = np.random.default_rng(2025)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    categories = {name: i for i, name in enumerate(DETECTION_COATS)}
    for name, coat in DETECTION_COATS.items():
        (folder / "images" / name).mkdir(parents=True, exist_ok=True)
        for i in range(PER_CLASS_DETECTION):
            img, box = detection_photo(rng, coat)
            file_name = f"{name}/{name}_{i:03d}.jpg"
            data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 70])[1]
            (folder / "images" / file_name).write_bytes(data.tobytes())
            image_id = len(images)
            images.append(
                {
                    "id": image_id,
                    "file_name": file_name,
                    "height": img.shape[0],
                    "width": img.shape[1],
                }
            )
            annotation: dict[str, Any] = {
                "id": image_id,
                "image_id": image_id,
                "category_id": categories[name],
            }
            if box is not None:
                annotation["bbox"] = box
            annotations.append(annotation)
    cct = {
        "info": {"description": "synthetic camera-trap photos with drawn animals, made in code"},
        "images": images,
        "annotations": annotations,
        "categories": [{"id": i, "name": n} for n, i in categories.items()],
    }
    (folder / "boxes.json").write_text(json.dumps(cct, indent=1))
    (folder / "detector.onnx").write_bytes(detector())
    print(f"wrote {len(images)} detection photos, boxes.json and detector.onnx to {folder}")


if __name__ == "__main__":
    main()
