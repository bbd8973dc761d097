"""ImageLIME and ImageSHAP on both backends, against independent references: a small ONNX graph
whose score is the mean red value of the top-left quadrant of the 32 x 32 image it sees, so that
with black for a superpixel turned off the score is linear in the superpixels kept, and each
superpixel's exact weight (its Shapley value, and LIME's unregularized coefficient) is the red
it brings to the quadrant, worked out with numpy on the image OpenCV resizes; the lime package's
LimeImageExplainer given the same superpixels; superpixels that follow a photo's flat blocks.
Where the model image lies in the photo (crops, letterbox, flips): against the model image
OpenCV makes of a photo whose colours say where each pixel is, and hand-worked crop windows.
"""

from __future__ import annotations

import cv2
import lime.lime_image
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from pyspark.ml import PipelineModel

from mmlspark.explainers import (
    ImageLIME,
    ImageSHAP,
    heatmap,
    photo_labels,
    superpixel_clusters,
    write_heatmap,
)
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer

BACKENDS = ["jvm", "python"]
SIZE = 32  # the model's input side
HALF = SIZE // 2


def _quadrant_model() -> bytes:
    """x: float [N, 3, 32, 32] (RGB, 0 to 1) -> score [N, 1]: the mean red of rows and columns
    0 to 15."""
    f = TensorProto.FLOAT
    longs = [
        numpy_helper.from_array(np.array(v, dtype=np.int64), n)
        for n, v in (("starts", [0, 0, 0]), ("ends", [1, HALF, HALF]), ("axes", [1, 2, 3]))
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["red"]),
            helper.make_node("ReduceMean", ["red"], ["score"], axes=[2, 3], keepdims=0),
        ],
        "quadrant",
        [helper.make_tensor_value_info("x", f, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("score", f, ["N", 1])],
        initializer=longs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def _blocks() -> np.ndarray:
    """A 64 x 64 BGR photo of 4 x 4 flat blocks of distinct colours (16 pixels each)."""
    rng = np.random.default_rng(11)
    colours = rng.permutation(np.linspace(20, 235, 16)).astype(np.uint8)
    photo = np.zeros((64, 64, 3), np.uint8)
    for b in range(16):
        y, x = divmod(b, 4)
        photo[16 * y : 16 * y + 16, 16 * x : 16 * x + 16] = (
            rng.integers(0, 255),
            rng.integers(0, 255),
            colours[b],
        )
    return photo


def _smooth() -> np.ndarray:
    """A 48 x 40 photo of smooth random colours (no flat regions: ties and rounding matter)."""
    rng = np.random.default_rng(5)
    small = rng.integers(0, 256, size=(6, 5, 3)).astype(np.uint8)
    noise = rng.integers(0, 12, size=(48, 40, 3)).astype(np.uint8)
    return cv2.resize(small, (40, 48), interpolation=cv2.INTER_CUBIC) + noise


def _png(pixels: np.ndarray) -> bytes:
    return cv2.imencode(".png", pixels)[1].tobytes()


@pytest.fixture(scope="module")
def setup(spark):
    photos = {"blocks": _blocks(), "smooth": _smooth()}
    rows = spark.createDataFrame(
        [(name, bytearray(_png(p))) for name, p in photos.items()], "name string, image binary"
    )
    sizing = (
        ImageTransformer(inputCol="image", outputCol="tensor")
        .resize(SIZE, SIZE)
        .normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], colorScaleFactor=1 / 255)
    )
    onnx = ONNXModel(feedDict={"x": "tensor"}, fetchDict={"score": "score"})
    onnx.setModelPayload(_quadrant_model())
    model = PipelineModel(stages=[sizing, onnx])
    runs = {}
    for backend in BACKENDS:
        for stage in (
            ImageLIME(numSamples=60, samplingFraction=0.6),
            ImageSHAP(numSamples=80, outputCol="shap", metricsCol="fit"),
        ):
            stage.setInputCol("image").setModel(model).setTargetCol("score").setCellSize(8.0)
            out = stage.setBackend(backend).transform(rows).collect()
            runs[(backend, type(stage).__name__)] = {r["name"]: r for r in out}
    return {"photos": photos, "rows": rows, "model": model, "runs": runs}


def _labels(row) -> np.ndarray:
    sp = row["superpixels"]
    return np.asarray(sp["labels"]).reshape(sp["height"], sp["width"])


def _exact_weights(photo: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each superpixel's red in the quadrant / (255 * quadrant pixels), on OpenCV's resize."""
    seen = cv2.resize(photo, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
    red = seen[:HALF, :HALF, 2].astype(np.float64) / 255.0
    quadrant = labels[:HALF, :HALF]
    weights = np.zeros(int(labels.max()) + 1)
    np.add.at(weights, quadrant.reshape(-1), red.reshape(-1) / red.size)
    return weights


def test_superpixels_follow_the_blocks_and_agree_on_both_backends(setup):
    runs = setup["runs"]
    for name, photo in setup["photos"].items():
        reference = _labels(runs[("jvm", "ImageLIME")][name])
        assert reference.shape == (SIZE, SIZE)
        struct = runs[("jvm", "ImageLIME")][name]["superpixels"]
        for key, out in runs.items():
            np.testing.assert_array_equal(_labels(out[name]), reference, err_msg=str(key))
            assert out[name]["superpixels"] == struct, key  # the mapping too, bit for bit
        # the PNG's own size, and a resize to 32 x 32 scales each axis by 32 / its side
        h, w = photo.shape[:2]
        assert (struct["sourceHeight"], struct["sourceWidth"]) == (h, w)
        assert struct["transform"] == [SIZE / w, 0.0, SIZE / h, 0.0]
    # the blocks (8 x 8 pixels once resized): one superpixel each, numbered row by row
    labels = _labels(runs[("python", "ImageSHAP")]["blocks"])
    expected = np.kron(np.arange(16).reshape(4, 4), np.ones((8, 8), dtype=int))
    np.testing.assert_array_equal(labels, expected)
    smooth = _labels(runs[("python", "ImageLIME")]["smooth"])
    assert 10 <= smooth.max() + 1 <= 16


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_weights_are_the_red_each_superpixel_brings_to_the_quadrant(setup, backend):
    runs = setup["runs"]
    for name, photo in setup["photos"].items():
        lime_row = runs[(backend, "ImageLIME")][name]
        shap_row = runs[(backend, "ImageSHAP")][name]
        exact = _exact_weights(photo, _labels(lime_row))
        (weights,) = [v.toArray() for v in lime_row["explanation"]]
        np.testing.assert_allclose(weights, exact, atol=2e-5)
        assert lime_row["r2"][0] == pytest.approx(1.0, abs=1e-6)
        (values,) = [v.toArray() for v in shap_row["shap"]]
        np.testing.assert_allclose(values, np.concatenate([[0.0], exact]), atol=2e-5)
        assert shap_row["fit"][0] == pytest.approx(1.0, abs=1e-6)
        # the highest weights are the quadrant's superpixels
        inside = np.unique(_labels(lime_row)[:HALF, :HALF])
        top = np.argsort(-weights)[: len(inside)]
        assert set(top) == set(inside)
    # the same masks on both backends: the same LIME weights
    if backend == "python":
        for name in setup["photos"]:
            a = runs[("jvm", "ImageLIME")][name]["explanation"][0].toArray()
            b = runs[("python", "ImageLIME")][name]["explanation"][0].toArray()
            np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_that_is_not_an_image_transformer_first_gets_full_size_png_samples(setup, backend):
    """Behind a SQLTransformer, the model's first stage is no ImageTransformer: the superpixels
    are the 64 x 64 photo's (blocks of 16 pixels) and each sample goes back to the binary column
    as PNG, decoded and resized by the model (a 2 x 2 mean of flat blocks: exact)."""
    from pyspark.ml.feature import SQLTransformer

    model = PipelineModel(
        stages=[SQLTransformer(statement="SELECT * FROM __THIS__"), *setup["model"].stages]
    )
    rows = setup["rows"].filter("name = 'blocks'")
    stage = ImageLIME(inputCol="image", model=model, targetCol="score", numSamples=40)
    (row,) = stage.setBackend(backend).transform(rows).collect()
    labels = _labels(row)
    np.testing.assert_array_equal(
        labels, np.kron(np.arange(16).reshape(4, 4), np.ones((16, 16), dtype=int))
    )
    red = setup["photos"]["blocks"][:SIZE, :SIZE, 2] / 255.0
    exact = np.zeros(16)
    np.add.at(exact, labels[:SIZE, :SIZE].reshape(-1), red.reshape(-1) / red.size)
    np.testing.assert_allclose(row["explanation"][0].toArray(), exact, atol=2e-5)


def test_lime_agrees_with_the_lime_package_given_the_same_superpixels(setup):
    photo = setup["photos"]["smooth"]
    row = setup["runs"][("jvm", "ImageLIME")]["smooth"]
    labels = _labels(row)
    ours = row["explanation"][0].toArray()
    seen = cv2.cvtColor(cv2.resize(photo, (SIZE, SIZE)), cv2.COLOR_BGR2RGB).astype(np.float64)

    def classify(images):
        red = np.asarray(images)[:, :HALF, :HALF, 0] / 255.0
        return red.mean(axis=(1, 2))[:, None]

    explanation = lime.lime_image.LimeImageExplainer(random_state=0).explain_instance(
        seen,
        classify,
        labels=(0,),
        top_labels=None,
        hide_color=0,
        num_samples=300,
        segmentation_fn=lambda image: labels,
        batch_size=300,
    )
    theirs = np.zeros(len(ours))
    for feature, weight in explanation.local_exp[0]:
        theirs[feature] = weight
    inside = np.argsort(-ours)[: len(np.unique(labels[:HALF, :HALF]))]
    assert np.all(ours[inside] > 0) and np.all(theirs[inside] > 0)
    assert list(np.argsort(-theirs[inside])) == list(np.argsort(-ours[inside]))
    outside = np.setdiff1d(np.arange(len(ours)), inside)
    assert np.max(np.abs(theirs[outside])) < np.min(theirs[inside])


def test_heatmap_tints_the_photo_by_weight(setup, tmp_path):
    photo = setup["photos"]["blocks"]
    row = setup["runs"][("python", "ImageSHAP")]["blocks"]
    picture = heatmap(photo, row["superpixels"], row["shap"][0], alpha=0.5)
    assert picture.shape == photo.shape and picture.dtype == np.uint8
    values = row["shap"][0].toArray()[1:]
    strongest = int(np.argmax(values))  # at 8 x 8 on the model's image: 16 x 16 on the photo
    y, x = divmod(strongest, 4)
    block = (slice(16 * y, 16 * y + 16), slice(16 * x, 16 * x + 16))
    expected = np.rint(photo[block].astype(float) * 0.5 + np.array([0, 0, 255.0]) * 0.5)
    np.testing.assert_array_equal(picture[block], expected.astype(np.uint8))
    # a superpixel of weight 0 (outside the quadrant) is left as it was
    np.testing.assert_array_equal(picture[48:, 48:], photo[48:, 48:])
    path = write_heatmap(
        tmp_path / "blocks.png", _png(photo), row["superpixels"], values, alpha=0.5
    )
    np.testing.assert_array_equal(cv2.imread(path), picture)
    with pytest.raises(ValueError, match="one value per superpixel"):
        heatmap(photo, row["superpixels"], values[:3])


def test_save_load_and_pipeline_round_trip(setup, tmp_path):
    stage = ImageLIME(
        inputCol="image",
        model=setup["model"],
        targetCol="score",
        numSamples=60,
        samplingFraction=0.6,
        cellSize=8.0,
        modifier=50.0,
        superpixelCol="segments",
    )
    PipelineModel(stages=[stage]).save(str(tmp_path / "pipeline"))
    (loaded,) = PipelineModel.load(str(tmp_path / "pipeline")).stages
    assert isinstance(loaded, ImageLIME)
    assert loaded.getCellSize() == 8.0 and loaded.getModifier() == 50.0
    assert loaded.getSamplingFraction() == 0.6 and loaded.getSuperpixelCol() == "segments"
    assert [type(s).__name__ for s in loaded.getModel().stages] == ["ImageTransformer", "ONNXModel"]
    stage.save(str(tmp_path / "lime"))
    again = ImageLIME.load(str(tmp_path / "lime"))
    assert again.uid == stage.uid and again.getNumSamples() == 60


def test_misuse_fails_before_any_job_with_the_same_message_on_both_backends(setup):
    rows, model = setup["rows"], setup["model"]

    def message(backend, **params):
        stage = ImageLIME(model=model, **{"targetCol": "score", **params}).setBackend(backend)
        with pytest.raises(Exception) as caught:
            stage.transform(rows)
        text = str(caught.value).replace(stage.uid, "UID")
        return text[text.index("ImageLIME UID") :].strip()  # the JVM's, less py4j's wrapping

    cases = [
        ({}, "param 'inputCol' must name the image column to explain"),
        ({"inputCol": "name"}, "must be an image struct or encoded image bytes (binary)"),
        ({"inputCol": "image", "superpixelCol": "name"}, "'name' already exists"),
        ({"inputCol": "image", "superpixelCol": "explanation"}, "superpixelCol"),
        ({"inputCol": "image", "targetCol": "probability"}, "'probability' does not exist"),
    ]
    for params, expected in cases:
        found = {backend: message(backend, **params) for backend in BACKENDS}
        assert expected in found["jvm"], found
        assert found["python"] == found["jvm"], found
    for backend in BACKENDS:
        with pytest.raises(ValueError, match="samplingFraction"):
            ImageLIME().setBackend(backend).setSamplingFraction(0.0)
        with pytest.raises(ValueError, match="cellSize"):
            ImageSHAP().setBackend(backend).setCellSize(-1.0)


# Where the model image lies in the photo. The photo's colours say where each pixel is: blue
# grows along x, green along y. Each chain's model image is made again with OpenCV, from
# hand-worked sizes: resizeShorter(40) of 90 x 160 is 40 x 71 (160 * 40 / 90 = 71.1), and its
# 32 x 32 centre starts at row 4, column 19; letterbox(32) scales by 0.2 to 18 x 32 and pads 7
# rows above and below; the 32 x 32 centre crop of 90 x 160 starts at row 29, column 64.
GRAD_H, GRAD_W = 90, 160
CHAINS = {
    "shorter_centre": (
        lambda t: t.resize(size=40, keepAspectRatio=True).centerCrop(SIZE, SIZE),
        lambda p: cv2.resize(p, (71, 40), interpolation=cv2.INTER_LINEAR)[4:36, 19:51],
    ),
    "letterbox": (
        lambda t: t.letterbox(SIZE),
        lambda p: cv2.copyMakeBorder(
            cv2.resize(p, (32, 18), interpolation=cv2.INTER_LINEAR),
            7,
            7,
            0,
            0,
            cv2.BORDER_CONSTANT,
            value=(114, 114, 114),
        ),
    ),
    "crop_flip": (
        lambda t: t.crop(x=50, y=10, height=64, width=96).resize(SIZE, SIZE).flip(-1),
        lambda p: cv2.flip(cv2.resize(p[10:74, 50:146], (SIZE, SIZE)), -1),
    ),
    "centre": (lambda t: t.centerCrop(SIZE, SIZE), lambda p: p[29:61, 64:96]),
}
#: The photo pixels each model sees: those whose centre falls in the model image (hand-worked:
#: column c of shorter_centre lands at (c + 0.5) * 71 / 160 - 19, in [0, 32) for c in 43..114).
VIEWS = {
    "shorter_centre": np.s_[9:81, 43:115],
    "letterbox": np.s_[:, :],
    "crop_flip": np.s_[10:74, 50:146],
    "centre": np.s_[29:61, 64:96],
}


def _gradient() -> np.ndarray:
    y, x = np.mgrid[0:GRAD_H, 0:GRAD_W].astype(np.float64)
    blue, green = x * 255 / (GRAD_W - 1), y * 255 / (GRAD_H - 1)
    return np.rint(np.stack([blue, green, (blue + green) / 2], axis=-1)).astype(np.uint8)


@pytest.fixture(scope="module")
def geometry(spark, setup):
    """Each chain's ImageLIME row on both backends: the photo as PNG bytes, and as an image
    struct for the centre crop."""
    photo = _gradient()
    encoded = spark.createDataFrame([(bytearray(_png(photo)),)], "image binary")
    struct = spark.createDataFrame(
        [((None, GRAD_H, GRAD_W, 3, 16, bytearray(photo.tobytes())),)],
        "image struct<origin:string,height:int,width:int,nChannels:int,mode:int,data:binary>",
    )
    onnx = setup["model"].stages[1]
    rows = {}
    for chain, (build, _) in CHAINS.items():
        sizing = build(ImageTransformer(inputCol="image", outputCol="tensor")).normalize(
            mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], colorScaleFactor=1 / 255
        )
        model = PipelineModel(stages=[sizing, onnx])
        for backend in BACKENDS:
            stage = ImageLIME(inputCol="image", model=model, targetCol="score", numSamples=12)
            stage.setCellSize(16.0).setBackend(backend)
            (rows[(backend, chain)],) = stage.transform(
                struct if chain == "centre" else encoded
            ).collect()
    return rows


def test_the_superpixels_say_where_the_model_image_lies_in_the_photo(geometry):
    photo = _gradient().astype(int)
    for chain, (_, reference) in CHAINS.items():
        seen = reference(_gradient()).astype(int)
        assert seen.shape == (SIZE, SIZE, 3)
        sp = geometry[("jvm", chain)]["superpixels"]
        assert geometry[("python", chain)]["superpixels"] == sp, chain  # bit for bit
        assert (sp["height"], sp["width"], sp["sourceHeight"], sp["sourceWidth"]) == (
            SIZE,
            SIZE,
            GRAD_H,
            GRAD_W,
        )
        ax, bx, ay, by = sp["transform"]
        cols = np.floor(ax * (np.arange(GRAD_W) + 0.5) + bx).astype(int)
        rows = np.floor(ay * (np.arange(GRAD_H) + 0.5) + by).astype(int)
        inside = ((rows >= 0) & (rows < SIZE))[:, None] & ((cols >= 0) & (cols < SIZE))[None, :]
        expected = np.zeros_like(inside)
        expected[VIEWS[chain]] = True
        np.testing.assert_array_equal(inside, expected, err_msg=chain)
        # each photo pixel lands on a model pixel of its colour: no bias (a shift of one model
        # pixel would be 3 or more levels), and off by at most half a model pixel's span
        mapped = seen[np.clip(rows, 0, SIZE - 1)][:, np.clip(cols, 0, SIZE - 1)]
        error = (photo - mapped)[inside][:, :2]
        assert np.all(np.abs(error.mean(axis=0)) < 1.0), (chain, error.mean(axis=0))
        assert np.abs(error).max() <= 9, chain
    # a flip has negative scales; a letterbox's padding is seen by no photo pixel
    assert np.all(np.array(geometry[("jvm", "crop_flip")]["superpixels"]["transform"])[::2] < 0)


def test_heatmap_of_a_centre_crop_model_tints_the_crop_window_only(geometry):
    photo = _gradient()
    sp = geometry[("python", "centre")]["superpixels"]
    labels = np.asarray(sp["labels"]).reshape(SIZE, SIZE)
    count = int(labels.max()) + 1
    weights = np.arange(1.0, count + 1.0)  # every superpixel tinted, each its own strength
    picture = heatmap(photo, sp, weights, alpha=0.5)
    outside = np.ones((GRAD_H, GRAD_W), bool)
    outside[29:61, 64:96] = False
    np.testing.assert_array_equal(picture[outside], photo[outside])
    opacity = (0.5 * weights[labels] / weights.max())[:, :, None]
    window = photo[29:61, 64:96].astype(float)  # where OpenCV's crop took the model image from
    expected = np.rint(window * (1 - opacity) + np.array([0, 0, 255.0]) * opacity)
    np.testing.assert_array_equal(picture[29:61, 64:96], expected.astype(np.uint8))
    # a photo of half the size (as a reduced decode gives): the window halves
    small = cv2.resize(photo, (GRAD_W // 2, GRAD_H // 2), interpolation=cv2.INTER_AREA)
    tinted = np.any(heatmap(small, sp, weights) != small, axis=2)
    expected_small = np.zeros_like(tinted)
    expected_small[14:30, 32:48] = True
    np.testing.assert_array_equal(tinted, expected_small)


def test_superpixel_clusters_give_each_seen_pixel_once(geometry):
    sp = geometry[("jvm", "shorter_centre")]["superpixels"]
    clusters = superpixel_clusters(sp)
    assert len(clusters) == max(sp["labels"]) + 1
    owner = np.full((GRAD_H, GRAD_W), -1)
    seen = np.zeros((GRAD_H, GRAD_W), int)
    for k, pixels in enumerate(clusters):
        xs, ys = np.array(pixels).T
        np.add.at(seen, (ys, xs), 1)
        owner[ys, xs] = k
    expected = np.zeros_like(seen)
    expected[VIEWS["shorter_centre"]] = 1
    np.testing.assert_array_equal(seen, expected)
    np.testing.assert_array_equal(owner, photo_labels(sp))
    # at another size: the same as the heatmap's label map there
    half = superpixel_clusters(sp, 45, 80)
    assert sum(len(c) for c in half) == int(np.sum(photo_labels(sp, 45, 80) >= 0)) > 0
    (x, y) = half[0][0]
    assert photo_labels(sp, 45, 80)[y, x] == 0
    # a letterbox's superpixel is empty where it lies in the padding only (rows 0-6, 25-31)
    box = geometry[("python", "letterbox")]["superpixels"]
    labels = np.asarray(box["labels"]).reshape(SIZE, SIZE)
    shown = set(labels[7:25].ravel().tolist())
    for k, pixels in enumerate(superpixel_clusters(box)):
        assert (pixels == []) == (k not in shown), k


def test_misused_superpixel_structs_are_refused_clearly(geometry):
    sp = geometry[("jvm", "centre")]["superpixels"].asDict()
    photo = _gradient()
    with pytest.raises(ValueError, match="4 finite numbers"):
        heatmap(photo, {**sp, "transform": [1.0, 0.0]}, np.ones(max(sp["labels"]) + 1))
    with pytest.raises(ValueError, match="go together"):
        superpixel_clusters({**sp, "transform": None})
    with pytest.raises(ValueError, match="rotated"):
        heatmap(photo.transpose(1, 0, 2).copy(), sp, np.ones(max(sp["labels"]) + 1))
    with pytest.raises(ValueError, match="both height and width"):
        photo_labels(sp, height=45)
    with pytest.raises(ValueError, match="must have 1024 labels"):
        superpixel_clusters({**sp, "labels": sp["labels"][:-1]})
    # a struct of an older release (no mapping): the labels stretched, as before
    old = {"height": 2, "width": 2, "labels": [0, 1, 2, 3]}
    assert superpixel_clusters(old, 4, 4)[3] == [(2, 2), (3, 2), (2, 3), (3, 3)]
