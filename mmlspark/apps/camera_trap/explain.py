"""`explain`: where a trained classifier looked. For each photo (or the N it is least certain of)
the photo with a heatmap of ImageLIME's (or ImageSHAP's) weights for its predicted class, a
contact sheet of them all with each photo's name, class and confidence, and explanations.json.

The photos are decoded at the smallest JPEG scale that covers the model's input, as classify
decodes them, and the explainer perturbs that image: a 12 MP photo is never decoded per sample.
A model trained on detection crops (train --detector) takes the same detector as classify and
is explained on each photo's deciding crop (see `explain_crops`).
The folder's files are written whole (a temporary name, then renamed); a later run with
--overwrite removes only the files its explanations.json lists.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.ml.functions import vector_to_array
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap.detector import load_detector
from mmlspark.apps.camera_trap.explain_crops import crop_explanations
from mmlspark.apps.camera_trap.predictions import (
    _featurizer,
    _levels,
    classified,
    trained_on_crops,
)
from mmlspark.apps.camera_trap.results import check_folders
from mmlspark.apps.camera_trap.session import _qualified
from mmlspark.apps.camera_trap.settings import PREDICTION_INDEX, JobError, Log
from mmlspark.image import read_images

#: The file listing what a run wrote, and the folder of its heatmaps.
MANIFEST = "explanations.json"
HEATMAPS = "heatmaps"
FORMAT = "mmlspark-camera-trap-explain/1"
#: The contact sheet: thumbnails this wide at most, this many a row and a page.
THUMB = 240
COLUMNS = 6
PER_SHEET = 48
CAPTION = 40


def explain(
    spark: SparkSession,
    images: str,
    model_dir: str,
    out: str,
    *,
    photos: int = 16,
    samples: int = 500,
    method: str = "lime",
    cell_size: float | None = None,
    modifier: float | None = None,
    detector: str | None = None,
    threshold: float = 0.2,
    overwrite: bool = False,
    log: Log = print,
) -> dict[str, Any]:
    """Writes heatmaps of where the model in `model_dir` looked, for the `photos` photos under
    `images` it is least certain of (every photo when 0), into `out`; returns the summary
    explanations.json holds. A model trained on crops (train --detector) needs the `detector`
    and `threshold` classify took: each photo is explained on the crop that decides its class,
    and a photo without one gets no heatmap (counted as `without_detection`)."""
    if photos < 0:
        raise JobError(f"--photos must be 0 (every photo) or more, not {photos}")
    if samples < 2:
        raise JobError(f"--samples must be at least 2, not {samples}")
    if method not in ("lime", "shap"):
        raise JobError(f"--method must be lime or shap, not {method!r}")
    folder = Path(out)
    check_folders(images, folder)
    previous = _previous_files(folder, overwrite)
    try:
        model = mmlspark.load_pipeline(model_dir)
        levels = _levels(model)
    except JobError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to load is reported the same way
        raise JobError(f"cannot load a camera-trap model from {model_dir}: {e}") from None
    featurizer = _featurizer(model)
    if featurizer is None:
        raise JobError(f"the model in {model_dir} has no ImageFeaturizer: not one train wrote")
    root = _qualified(spark, images)
    explaining = f"[explain] {method.upper()} with {samples} samples a photo"
    extra: dict[str, Any] = {}
    if trained_on_crops(model, model_dir, detector, "explain"):
        assert detector is not None
        found = load_detector(spark, detector)
        explainer = _explainer(model, method, samples, cell_size, modifier, "crop")
        pictures, extra = crop_explanations(
            spark, root, model, found, threshold, photos, explainer, log
        )
        log(f"{explaining}, on its deciding crop")
        nothing = f"has an animal detection at or over {threshold} that the model classified"
    else:
        explainer = _explainer(model, method, samples, cell_size, modifier, "image")
        height, width = featurizer.getImageHeight(), featurizer.getImageWidth()
        read = read_images(spark, images, minHeight=height, minWidth=width)
        pictures = _photo_explanations(model, read, photos, explainer, explaining, log)
        nothing = "could be read and classified"
    entries = _write(folder, pictures, levels, root, log)
    if not entries:
        raise JobError(f"no photo under {images} {nothing}")
    _remove(folder, previous - {e["heatmap"] for e in entries})
    sheets = _contact_sheets(folder, entries)
    summary = {
        "format": FORMAT,
        "images": images,
        "model": str(Path(model_dir).resolve()),
        "method": method,
        "samples": samples,
        **extra,
        "photos": entries,
        "contact_sheets": sheets,
        "files": sorted({*(e["heatmap"] for e in entries), *sheets, MANIFEST}),
    }
    _write_bytes(folder / MANIFEST, json.dumps(summary, indent=2).encode())
    log(f"[explain] wrote {len(entries)} heatmaps and {', '.join(sheets)} to {folder}")
    return summary


def _explainer(
    model: Any,
    method: str,
    samples: int,
    cell_size: float | None,
    modifier: float | None,
    input_col: str,
) -> Any:
    from mmlspark.explainers import ImageLIME, ImageSHAP

    stage = ImageLIME() if method == "lime" else ImageSHAP()
    stage.setModel(model).setInputCol(input_col).setTargetCol("probability")
    stage.setTargetClassesCol("_targets").setOutputCol("_weights").setNumSamples(samples)
    stage.setSuperpixelCol("_superpixels")
    if method == "lime":
        stage.setMetricsCol("_r2")
    if cell_size is not None:
        stage.setCellSize(cell_size)
    if modifier is not None:
        stage.setModifier(modifier)
    return stage


def _photo_explanations(
    model: Any, read: DataFrame, photos: int, explainer: Any, explaining: str, log: Log
) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
    """The heatmaps of the `photos` photos of `read` (decoded to cover the model's input) the
    model is least certain of (every photo when 0), as (fields, picture) pairs for `_write`, each
    made as it arrives on the driver (one partition at a time)."""
    from mmlspark.explainers import heatmap

    scored = classified(model, read).filter(F.col("probability").isNotNull())
    confidence = F.element_at(
        vector_to_array(F.col("probability")), F.col(PREDICTION_INDEX).cast("int") + 1
    )
    rows = scored.select(
        "path",
        "image",
        F.col(PREDICTION_INDEX).cast("int").alias("_class"),
        confidence.alias("confidence"),
    )
    # The N least certain photos are few: cached, so they are decoded and scored once more only
    # by the explainer. Every photo of a survey is streamed instead (no cache of its pixels).
    chosen = rows.orderBy("confidence", "path").limit(photos).cache() if photos else rows
    try:
        if photos:
            log(f"[explain] the {chosen.count()} photos the model is least certain of")
        log(explaining)
        explained = explainer.transform(chosen.withColumn("_targets", F.array("_class")))
        columns = ["path", "image", "_class", "confidence", "_weights", "_superpixels"]
        if "_r2" in explained.columns:
            columns.append("_r2")
        for row in explained.select(*columns).toLocalIterator():
            fields = {
                "path": row["path"],
                "class": row["_class"],
                "confidence": row["confidence"],
                "r2": row["_r2"][0] if "_r2" in columns and row["_r2"] is not None else None,
            }
            yield fields, heatmap(row["image"], row["_superpixels"], row["_weights"][0])
    finally:
        chosen.unpersist()


def _write(
    folder: Path,
    pictures: Iterable[tuple[dict[str, Any], np.ndarray]],
    levels: list[str],
    root: str,
    log: Log,
) -> list:
    """Writes each photo's heatmap as it comes (its fields: `path`, `class`, `confidence`, `r2`
    or None, and a crop model's `detection`); returns the photos' entries (`file` relative to
    `root`, the qualified --images, as results.json names photos), least certain first."""
    (folder / HEATMAPS).mkdir(parents=True, exist_ok=True)
    entries = []
    names: set[str] = set()
    for fields, picture in pictures:
        path = fields["path"]
        relative = path[len(root) + 1 :] if path.startswith(root + "/") else path
        name = _heatmap_name(relative, names)
        _write_png(folder / name, picture)
        entry = {
            "file": relative,
            "label": levels[fields["class"]],
            "confidence": round(float(fields["confidence"]), 6),
            "heatmap": name,
        }
        if fields["r2"] is not None:
            entry["r2"] = round(float(fields["r2"]), 6)
        if "detection" in fields:
            entry["detection"] = fields["detection"]
        entries.append(entry)
        if len(entries) % 10 == 0:
            log(f"[explain] {len(entries)} heatmaps written")
    return sorted(entries, key=lambda e: (e["confidence"], e["file"]))


def _heatmap_name(relative: str, taken: set[str]) -> str:
    """heatmaps/<the photo's path under --images, folders joined by '__'>.png, unique."""
    parts = relative.split(":", 1)[-1].strip("/").split("/")
    stem = "__".join(p for p in parts if p not in ("", ".", ".."))
    stem = "".join(c if c.isalnum() or c in "-_. " else "_" for c in stem)[:180] or "photo"
    name, k = f"{HEATMAPS}/{stem}.png", 1
    while name in taken:
        k += 1
        name = f"{HEATMAPS}/{stem}-{k}.png"
    taken.add(name)
    return name


def _contact_sheets(folder: Path, entries: list[dict]) -> list[str]:
    """contact_sheet.png (contact_sheet_01.png, ... past PER_SHEET photos): the heatmaps'
    thumbnails, least certain first, each captioned with its file name, class and confidence."""
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    pages = math.ceil(len(entries) / PER_SHEET)
    names = []
    for page in range(pages):
        chunk = entries[page * PER_SHEET : (page + 1) * PER_SHEET]
        rows = math.ceil(len(chunk) / COLUMNS)
        height = THUMB * 3 // 4
        sheet = np.full((rows * (height + CAPTION), COLUMNS * THUMB, 3), 255, np.uint8)
        for k, entry in enumerate(chunk):
            picture = cv2.imread(str(folder / entry["heatmap"]), cv2.IMREAD_COLOR)
            scale = min(THUMB / picture.shape[1], height / picture.shape[0])
            size = (max(1, int(picture.shape[1] * scale)), max(1, int(picture.shape[0] * scale)))
            thumb = cv2.resize(picture, size, interpolation=cv2.INTER_AREA)
            top, left = (k // COLUMNS) * (height + CAPTION), (k % COLUMNS) * THUMB
            sheet[top : top + size[1], left : left + size[0]] = thumb
            caption = (
                entry["file"].rsplit("/", 1)[-1][:30],
                f"{entry['label']} {entry['confidence']:.2f}",
            )
            for line, text in enumerate(caption):
                cv2.putText(
                    sheet,
                    text,
                    (left + 4, top + height + 15 + 16 * line),
                    cv2.FONT_HERSHEY_SIMPLEX,
                    0.42,
                    (0, 0, 0),
                    1,
                    cv2.LINE_AA,
                )
        name = "contact_sheet.png" if pages == 1 else f"contact_sheet_{page + 1:02d}.png"
        _write_png(folder / name, sheet)
        names.append(name)
    return names


def _previous_files(folder: Path, overwrite: bool) -> set[str]:
    """The files an earlier explain run listed in `folder` (to remove with --overwrite). A
    folder holding anything else, or an earlier run without --overwrite, is refused."""
    if not folder.exists() or not any(folder.iterdir()):
        return set()
    manifest = folder / MANIFEST
    try:
        previous = json.loads(manifest.read_text()) if manifest.is_file() else None
    except (OSError, ValueError):
        previous = None
    if not isinstance(previous, dict) or previous.get("format") != FORMAT:
        raise JobError(
            f"--out {folder} holds files explain did not write; choose a new or empty folder"
        )
    if not overwrite:
        raise JobError(
            f"--out {folder} holds an earlier explain run's heatmaps; add --overwrite to "
            "replace them, or choose another folder"
        )
    return {str(f) for f in previous.get("files", []) if isinstance(f, str)}


def _remove(folder: Path, names: set[str]) -> None:
    """Unlinks the listed files that are plain files inside `folder` (never through a link,
    never outside it)."""
    root = folder.resolve()
    for name in names:
        if name == MANIFEST or os.path.isabs(name) or ".." in Path(name).parts:
            continue
        target = folder / name
        if target.is_symlink() or not target.is_file():
            continue
        if target.resolve().parent.is_relative_to(root):
            target.unlink()


def _write_png(path: Path, picture: np.ndarray) -> None:
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    ok, encoded = cv2.imencode(".png", picture)
    if not ok:
        raise JobError(f"cannot encode {path.name} as PNG")
    _write_bytes(path, encoded.tobytes())


def _write_bytes(path: Path, data: bytes) -> None:
    """Writes `path` whole: a temporary file in its folder, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
