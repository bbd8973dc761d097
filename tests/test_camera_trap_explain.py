"""`mmlspark-camera-trap explain`: heatmaps of where a trained model looked, for the photos it is
least certain of, a contact sheet, and explanations.json; a folder it did not write is refused,
and --overwrite removes only what the earlier run listed. A model trained on detection crops is
explained on each photo's deciding crop, with the detector classify takes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from pyspark.ml.functions import vector_to_array
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap import __main__ as cli
from mmlspark.apps.camera_trap import job
from mmlspark.image import read_images

DEMO = job.DEMO_DATA
DETECTION = DEMO / "detection"
DETECTOR = DETECTION / "detector.onnx"
#: The tint's colours and the box's (BGR), as explain draws them.
RED, BLUE, YELLOW = (0, 0, 255), (255, 0, 0), (0, 255, 255)


def _copy(target: Path, names: list[str]) -> Path:
    """The demo's detection photos `names` (folder/stem) copied under `target`."""
    for name in names:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DETECTION / "images" / f"{name}.jpg", target / f"{name}.jpg")
    return target


@pytest.fixture(scope="module")
def crop_model(spark, tmp_path_factory) -> Path:
    """A species classifier trained on the crops of the demo detector's detections (`train
    --detector`) on four demo photos; read only."""
    root = tmp_path_factory.mktemp("crop-model")
    images = _copy(root / "train", ["fox/fox_000", "fox/fox_001", "deer/deer_000", "deer/deer_001"])
    featurizer, model = str(DEMO / "featurizer.onnx"), str(root / "model")
    job.train(spark, str(images), featurizer, model, detector=str(DETECTOR), log=print)
    return root / "model"


def reference_detection(photo: Path, threshold: float) -> tuple[float, list[float]] | None:
    """The most confident animal detection at or over `threshold` in `photo` (conf, bbox), by the
    demo detector run with onnxruntime on YOLOv5's letterbox of the photo as OpenCV decodes it
    (RGB / 255), its output decoded by tests/detection_reference.py."""
    import onnxruntime as ort
    from detection_reference import detect, letterbox

    session = ort.InferenceSession(str(DETECTOR), providers=["CPUExecutionProvider"])
    size = session.get_inputs()[0].shape[2]
    image = cv2.imread(str(photo), cv2.IMREAD_COLOR)
    tensor = letterbox(image, size)[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255
    raw = session.run(None, {session.get_inputs()[0].name: tensor})[0][0]
    found = [d for d in detect(raw, "yolov5", image.shape[:2], size, 0.005) if d[1] == "animal"]
    confident = [(conf, box) for _, _, conf, box in found if conf >= threshold]
    return confident[0] if confident else None


def least_certain(spark, model: Path, images: Path, n: int) -> list[tuple[str, str, float]]:
    """The n photos with the lowest top-class probability, by Spark's own transform of the
    saved pipeline and pandas: (file name, class, confidence)."""
    pipeline = mmlspark.load_pipeline(str(model))
    scored = pipeline.transform(read_images(spark, str(images)))
    frame = scored.select(
        "path", "prediction", F.array_max(vector_to_array("probability")).alias("p")
    ).toPandas()
    frame = frame.sort_values(["p", "path"]).head(n)
    root = f"file:{images}/"
    return [(p.removeprefix(root), c, float(v)) for p, c, v in frame.itertuples(index=False)]


def test_explain_writes_the_least_certain_photos_heatmaps_and_a_contact_sheet(
    spark, demo_model, tmp_path
):
    images = tmp_path / "survey"
    for label in ("deer", "fox", "empty"):
        shutil.copytree(DEMO / "images" / label, images / label)
    out = tmp_path / "explained"
    args = ["--images", str(images), "--model", str(demo_model), "--out", str(out)]
    summary = job.explain(spark, str(images), str(demo_model), str(out), photos=4, samples=64)

    expected = least_certain(spark, demo_model, images, 4)
    found = [(e["file"], e["label"], e["confidence"]) for e in summary["photos"]]
    assert [f[:2] for f in found] == [e[:2] for e in expected]
    assert [f[2] for f in found] == pytest.approx([e[2] for e in expected], rel=1e-5)
    assert all(-1.0 <= e["r2"] <= 1.0 for e in summary["photos"])
    assert json.loads((out / "explanations.json").read_text()) == summary

    for entry in summary["photos"]:
        photo = cv2.imread(str(images / entry["file"]), cv2.IMREAD_COLOR).astype(float)
        picture = cv2.imread(str(out / entry["heatmap"]), cv2.IMREAD_COLOR).astype(float)
        assert picture.shape == photo.shape
        # Every pixel is the photo blended toward pure red or pure blue (BGR), or the photo.
        moved = picture - photo
        assert np.abs(moved).max() > 20  # some superpixel carries weight
        # moved = share * (colour - photo) for red or blue, up to the PNG's rounding
        fits = []
        for colour in ((0, 0, 255), (255, 0, 0)):
            toward = np.array(colour, float) - photo
            share = (moved * toward).sum(axis=2) / np.maximum((toward * toward).sum(axis=2), 1)
            fits.append(np.abs(moved - share[:, :, None] * toward).max(axis=2))
        assert (np.minimum(*fits) <= 1.5).mean() > 0.99

    sheet = cv2.imread(str(out / "contact_sheet.png"), cv2.IMREAD_COLOR)
    assert sheet.shape == (180 + 40, 6 * 240, 3)
    assert summary["contact_sheets"] == ["contact_sheet.png"]

    # A second run is refused without --overwrite; with it, fewer photos leave no stale heatmap.
    assert cli.main(["explain", *args, "--photos", "2", "--samples", "32"]) == 2
    (out / "notes.txt").write_text("mine")
    assert cli.main(["explain", *args, "--photos", "2", "--samples", "32", "--overwrite"]) == 0
    again = json.loads((out / "explanations.json").read_text())
    heatmaps = sorted(p.relative_to(out).as_posix() for p in (out / "heatmaps").iterdir())
    assert heatmaps == sorted(e["heatmap"] for e in again["photos"]) and len(heatmaps) == 2
    assert (out / "notes.txt").read_text() == "mine"  # not ours: kept


def test_explain_refuses_folders_it_did_not_write_and_bad_options(spark, demo_model, tmp_path):
    images = DEMO / "images"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.docx").write_text("mine")
    with pytest.raises(job.JobError, match="holds files explain did not write"):
        job.explain(spark, str(images), str(demo_model), str(foreign), overwrite=True)
    assert (foreign / "thesis.docx").read_text() == "mine"
    with pytest.raises(job.JobError, match="overlap"):
        job.explain(spark, str(images), str(demo_model), str(images / "deer" / "out"))
    with pytest.raises(job.JobError, match="--photos must be 0"):
        job.explain(spark, str(images), str(demo_model), str(tmp_path / "a"), photos=-1)
    with pytest.raises(job.JobError, match="cannot load a camera-trap model"):
        job.explain(spark, str(images), str(tmp_path), str(tmp_path / "b"))


def test_explain_takes_the_detector_a_crop_model_needs_and_no_other(
    spark, demo_model, crop_model, tmp_path, capsys
):
    """As classify: a model trained on crops without --detector, and one trained on whole photos
    with it, are refused before any work, saying what to pass."""
    args = ["explain", "--images", str(DETECTION / "images"), "--out", str(tmp_path / "x")]
    assert cli.main([*args, "--model", str(crop_model)]) == 2
    said = capsys.readouterr().err
    assert "trained on detection crops (train --detector); explain with it needs --detector" in said
    assert cli.main([*args, "--model", str(demo_model), "--detector", str(DETECTOR)]) == 2
    said = capsys.readouterr().err
    assert "explain --detector needs a model trained on crops: train --detector" in said
    assert not (tmp_path / "x").exists()


def test_explain_a_crop_model_on_each_photos_deciding_crop(spark, crop_model, tmp_path):
    """explain --detector, on both backends alike: each photo with an animal is explained on its
    crop at the detector's own box (the detector run here with onnxruntime), with the class and
    confidence the model gives that crop, and its heatmap is the photo with the crop's weights
    over the pixels the crop took, hottest on the animal, and the box outlined; a photo without
    an animal detection gets no heatmap and is counted."""
    images = _copy(tmp_path / "survey", ["fox/fox_004", "deer/deer_004", "empty/empty_000"])
    assert reference_detection(images / "empty" / "empty_000.jpg", 0.2) is None
    boxes = {
        f"{n}.jpg": reference_detection(images / f"{n}.jpg", 0.2)
        for n in ("fox/fox_004", "deer/deer_004")
    }
    expected = reference_classes(spark, crop_model, images, {n: b[1] for n, b in boxes.items()})
    runs, said = {}, []
    for backend in ("jvm", "python"):
        mmlspark.set_backend(backend)
        try:
            runs[backend] = job.explain(spark, str(images), str(crop_model),
                                        str(tmp_path / backend), photos=0, samples=48,
                                        cell_size=24.0, detector=str(DETECTOR),
                                        log=said.append)  # fmt: skip
        finally:
            mmlspark.set_backend(None)
    assert sum("1 without an animal detection at or over 0.2 (no heatmap)" in s for s in said) == 2

    for backend, summary in runs.items():
        out = tmp_path / backend
        assert json.loads((out / "explanations.json").read_text()) == summary
        assert summary["without_detection"] == 1 and summary["failed"] == 0
        assert summary["threshold"] == 0.2 and summary["detector"] == str(DETECTOR.resolve())
        assert sorted(e["file"] for e in summary["photos"]) == sorted(boxes)
        heatmaps = sorted(p.relative_to(out).as_posix() for p in (out / "heatmaps").iterdir())
        assert heatmaps == sorted(e["heatmap"] for e in summary["photos"])  # none for the empty
        for entry in summary["photos"]:
            conf, box = boxes[entry["file"]]
            assert entry["detection"]["category"] == "1"
            assert entry["detection"]["conf"] == pytest.approx(conf, abs=1e-3)
            assert entry["detection"]["bbox"] == pytest.approx(box, abs=2e-4)
            label, confidence = expected[entry["file"]]
            assert (entry["label"], entry["file"].split("/")[0]) == (label, label)
            assert entry["confidence"] == pytest.approx(confidence, abs=1e-4)
            photo = cv2.imread(str(images / entry["file"]), cv2.IMREAD_COLOR)
            picture = cv2.imread(str(out / entry["heatmap"]), cv2.IMREAD_COLOR)
            _check_crop_heatmap(photo, picture, box)
    assert runs["python"]["photos"] == runs["jvm"]["photos"]


def reference_classes(
    spark, model: Path, images: Path, boxes: dict[str, list[float]]
) -> dict[str, tuple[str, float]]:
    """The class and confidence the saved crop model gives each photo's square crop around its box
    (cut with numpy from the photo as OpenCV decodes it, as CropDetections' `square` documents:
    the box's longer side, centred, inside the photo), given as PNG bytes."""
    rows = []
    for name, (bx, by, bw, bh) in boxes.items():
        photo = cv2.imread(str(images / name), cv2.IMREAD_COLOR)
        h, w = photo.shape[:2]
        x, y, cw, ch = int(bx * w), int(by * h), int(bw * w), int(bh * h)
        side = max(cw, ch)
        x = max(0, min(x - (side - cw) // 2, w - side))
        y = max(0, min(y - (side - ch) // 2, h - side))
        rows.append((name, cv2.imencode(".png", photo[y : y + side, x : x + side])[1].tobytes()))
    crops = spark.createDataFrame(rows, "name string, crop binary")
    scored = mmlspark.load_pipeline(str(model)).transform(crops)
    found = scored.select("name", "prediction", F.array_max(vector_to_array("probability")))
    return {name: (label, p) for name, label, p in found.collect()}


def _check_crop_heatmap(photo: np.ndarray, picture: np.ndarray, box: list[float]) -> None:
    """`picture` is `photo` with the box outlined in yellow, tinted toward red or blue only within
    the square around the box (CropDetections' square crop), most strongly inside the box."""
    assert picture.shape == photo.shape
    h, w = photo.shape[:2]
    x0, y0, x1, y1 = box[0] * w, box[1] * h, (box[0] + box[2]) * w, (box[1] + box[3]) * h
    top, left, bottom, right = round(y0), round(x0), round(y1) - 1, round(x1) - 1
    assert (picture[top, left : right + 1] == YELLOW).all()
    assert (picture[top : bottom + 1, right] == YELLOW).all()
    outline = np.zeros((h, w), bool)
    outline[top : bottom + 1, left : right + 1] = True
    outline[top + 1 : bottom, left + 1 : right] = False
    # The square crop: the box's longer side, centred on it, kept inside the photo (+-1 pixel).
    side = max(x1 - x0, y1 - y0)
    sx0 = min(max(x0 - (side - (x1 - x0)) / 2, 0), w - side)
    sy0 = min(max(y0 - (side - (y1 - y0)) / 2, 0), h - side)
    ys, xs = np.mgrid[0:h, 0:w]
    square = (xs >= sx0 - 1) & (xs < sx0 + side + 1) & (ys >= sy0 - 1) & (ys < sy0 + side + 1)
    inside = (xs >= x0) & (xs < x1) & (ys >= y0) & (ys < y1) & ~outline
    moved = picture.astype(float) - photo.astype(float)
    assert np.abs(moved[~square & ~outline]).max() <= 1.5  # untouched, up to decoding
    # Each tinted pixel: the photo moved a share of the way to red or to blue (its opacity).
    opacity = np.zeros((h, w))
    for colour in (RED, BLUE):
        toward = np.array(colour, float) - photo.astype(float)
        share = (moved * toward).sum(axis=2) / np.maximum((toward * toward).sum(axis=2), 1)
        fits = np.abs(moved - share[:, :, None] * toward).max(axis=2) <= 1.5
        opacity = np.maximum(opacity, np.where(fits & ~outline, share, 0.0))
    tinted = opacity > 0.05
    assert tinted[inside].mean() > 0.5 and not tinted[~square].any()
    # The hot region (at least half the strongest tint) lies on the animal, in its box.
    hot = opacity >= opacity.max() / 2
    assert opacity.max() > 0.3 and inside[hot].mean() > 0.8, (inside[hot].mean(), box)
