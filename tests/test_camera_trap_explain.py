"""`mmlspark-camera-trap explain`: heatmaps of where a trained model looked, for the photos it is
least certain of, a contact sheet, and explanations.json; a folder it did not write is refused,
and --overwrite removes only what the earlier run listed."""

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


def test_explain_refuses_folders_it_did_not_write_and_bad_options(
    spark, demo_model, demo_run, tmp_path
):
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
    # The demo's two-stage classifier (train --detector) reads detection crops, not photos.
    with pytest.raises(job.JobError, match="trained on detection crops"):
        job.explain(spark, str(images), str(demo_run[2] / "crop-model"), str(tmp_path / "c"))
    assert not (tmp_path / "c").exists()
