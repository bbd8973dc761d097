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

import numpy as np

HERE = Path(__file__).resolve().parent / "demo_data"
CLASSES = {"deer": (60, 95, 140), "fox": (30, 110, 225), "empty": None}  # BGR coat colours
PER_CLASS = 40
SIZE = 96


def photo(rng: np.random.Generator, coat: tuple[int, int, int] | None) -> np.ndarray:
    import cv2

    y, x = np.mgrid[0:SIZE, 0:SIZE]
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


if __name__ == "__main__":
    main()
