"""The demo: trains, classifies and evaluates on the embedded synthetic data, then runs the
detection part (detect, evaluate, and both stages)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from mmlspark.apps.camera_trap import store
from mmlspark.apps.camera_trap.evaluation import _show, evaluate
from mmlspark.apps.camera_trap.scoring import classify, detect
from mmlspark.apps.camera_trap.settings import JobError, Log
from mmlspark.apps.camera_trap.store import atomic_write
from mmlspark.apps.camera_trap.training import train

DEMO_DATA = Path(__file__).resolve().parent / "demo_data"


class DemoFiles:
    """The files a demo run wrote, listed in ``demo.json`` as it goes. A new demo into the same
    folder removes those files (and the folders they leave empty) and nothing else; a folder
    that is not empty and holds no ``demo.json`` of this job (its marker, relative names inside
    the folder, reached through no link) is refused."""

    NAME = "demo.json"
    FORMAT = "mmlspark camera-trap demo"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / self.NAME
        if folder.exists() and not folder.is_dir():
            raise JobError(f"--out {folder} is a file, not a folder")
        if os.path.lexists(self.path):
            self._remove(self._read())
        elif folder.exists() and any(folder.iterdir()):
            names = sorted(p.name for p in folder.iterdir())
            raise JobError(
                f"{folder} is not empty and is not a demo output ({len(names)} entries, e.g. "
                f"{', '.join(names[:3])}); choose a new or empty folder for --out"
            )
        self.files: set[str] = set()
        folder.mkdir(parents=True, exist_ok=True)
        self._save()

    def _read(self) -> list[str]:
        """The names demo.json lists, each checked: a manifest this job cannot prove it wrote
        is refused, and nothing is deleted for it."""
        try:
            if self.path.is_symlink():
                raise ValueError("it is a symbolic link")
            manifest = json.loads(self.path.read_text())
            if not isinstance(manifest, dict) or manifest.get("format") != self.FORMAT:
                raise ValueError(f"no 'format': '{self.FORMAT}' marker")
            names = manifest["files"]
            bad = [n for n in names if not self._own_name(n)]
            if bad:
                raise ValueError(f"it lists names outside its folder ({bad[:3]})")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise JobError(
                f"{self.path} is not a demo manifest this job wrote ({e}); nothing in "
                f"{self.folder} was changed: choose a new or empty folder for --out"
            ) from None
        return list(names)

    def _own_name(self, name: Any) -> bool:
        """A relative name inside the folder whose folders are real directories (no links)."""
        if not isinstance(name, str) or name.startswith("/") or "\\" in name:
            return False
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts):
            return False
        folder = self.folder
        for part in parts[:-1]:
            folder = folder / part
            if os.path.lexists(folder) and not store.real_directory(folder):
                return False
        return True

    def _remove(self, names: list[str]) -> None:
        folders: set[Path] = set()
        for name in names:
            path = self.folder / name
            store.remove_name(path)
            folders.update(p for p in path.parents if self.folder in p.parents)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            try:
                if store.real_directory(folder):
                    folder.rmdir()
            except OSError:
                pass  # holds something the demo did not write

    def _save(self) -> None:
        manifest = {"format": self.FORMAT, "files": sorted(self.files)}
        atomic_write(self.path, json.dumps(manifest, indent=1))

    def add(self, *paths: Path) -> None:
        self.files.update(p.relative_to(self.folder).as_posix() for p in paths)
        self._save()

    def add_tree(self, folder: Path) -> None:
        self.add(*[p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()])

    def copy_photos(self, source: Path, target: Path, *, split: bool = False) -> None:
        """Copies the embedded photos `source`/<label>/<name>_<index>.jpg to `target`/<label>/,
        or with `split` to `target`/test/<label>/ (every fourth photo) and `target`/train/."""
        for photo in sorted(source.glob("*/*.jpg")):
            folder = target
            if split:
                test = int(photo.stem.rsplit("_", 1)[1]) % 4 == 0
                folder = target / ("test" if test else "train")
            copy = folder / photo.parent.name / photo.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            self.add(copy)
            shutil.copyfile(photo, copy)


def demo(spark: SparkSession, out: str, log: Log = print, detection: bool = True) -> dict[str, Any]:
    """Train on three quarters of the embedded photos, classify and evaluate the rest; then,
    unless `detection` is False, the detection part (:func:`demo_detection`)."""
    out_dir = Path(out)
    written = DemoFiles(out_dir)
    written.copy_photos(DEMO_DATA / "images", out_dir / "data", split=True)
    log(
        "[demo] embedded data: synthetic photos drawn in code (deer, fox, empty) and a "
        "random-weight CNN featurizer, both made by mmlspark/apps/camera_trap/make_demo.py; "
        "no real wildlife photos or trained network"
    )
    start = time.perf_counter()
    _, trained = train(
        spark,
        str(out_dir / "data" / "train"),
        str(DEMO_DATA / "featurizer.onnx"),
        str(out_dir / "model"),
        log=log,
    )
    written.add_tree(out_dir / "model")
    summary = classify(
        spark,
        str(out_dir / "data" / "test"),
        str(out_dir / "model"),
        str(out_dir / "predictions"),
        log=log,
    )
    written.add_tree(out_dir / "predictions")
    metrics = evaluate(spark, str(out_dir / "predictions"), str(out_dir / "evaluation"), log=log)
    written.add_tree(out_dir / "evaluation")
    seconds = time.perf_counter() - start
    chance = 1 / len(metrics["labels"])
    log("[demo] stage      photos  failures  seconds  photos/s")
    for stage, stats in (("train", trained), ("classify", summary)):
        rate = stats["photos"] / max(stats["seconds"], 1e-9)
        log(
            f"[demo] {stage:<9} {stats['photos']:>7} {stats['failures']:>9} "
            f"{stats['seconds']:>8.1f} {rate:>9.1f}"
        )
    log(
        f"[demo] accuracy {metrics['accuracy']:.3f} on {metrics['photos']} held-out photos "
        f"(chance {chance:.3f}); {seconds:.1f} s in all"
    )
    found = demo_detection(spark, out_dir, written, log) if detection else {}
    return {"accuracy": metrics["accuracy"], "seconds": seconds, **summary, **found}


def demo_detection(
    spark: SparkSession, out_dir: Path, written: DemoFiles, log: Log = print
) -> dict[str, Any]:
    """The demo's detection part: `detect` and `evaluate` on photos with animals drawn at known
    boxes, then both stages: `train --detector` on three quarters of them and `classify
    --detector` on the rest."""
    data = DEMO_DATA / "detection"
    images = out_dir / "data" / "detection"
    written.copy_photos(data / "images", images)
    log(
        "[demo] detection part: 48 synthetic photos (one drawn deer or fox, or none; boxes in "
        "boxes.json) and a synthetic detector, an ONNX graph without learned weights that boxes "
        "the red-coated pixels in MegaDetector's output layout (make_demo.py). For real surveys: "
        "mmlspark-camera-trap detect --images photos/ --detector md_v5a.0.0.onnx --out det/ "
        "with a MegaDetector v5 ONNX export"
    )
    start = time.perf_counter()
    detector = str(data / "detector.onnx")
    found = detect(spark, str(images), detector, str(out_dir / "detections"), log=log)
    written.add_tree(out_dir / "detections")
    metrics = evaluate(
        spark,
        str(out_dir / "detections"),
        str(out_dir / "detection-evaluation"),
        labels=str(data / "boxes.json"),
        log=log,
    )
    written.add_tree(out_dir / "detection-evaluation")

    # Two stages: a species classifier trained on the crops of three quarters of the photos,
    # then detect-and-classify on the rest, empty photos among them.
    two_stage = out_dir / "data" / "two-stage"
    written.copy_photos(data / "images", two_stage, split=True)
    train(
        spark,
        str(two_stage / "train"),
        str(DEMO_DATA / "featurizer.onnx"),
        str(out_dir / "crop-model"),
        detector=detector,
        log=log,
    )
    written.add_tree(out_dir / "crop-model")
    classified = classify(
        spark,
        str(two_stage / "test"),
        str(out_dir / "crop-model"),
        str(out_dir / "two-stage"),
        detector=detector,
        log=log,
    )
    written.add_tree(out_dir / "two-stage")
    judged = evaluate(
        spark, str(out_dir / "two-stage"), str(out_dir / "two-stage-evaluation"), log=log
    )
    written.add_tree(out_dir / "two-stage-evaluation")
    seconds = time.perf_counter() - start
    boxes = metrics.get("detection_iou50", {})
    log(
        f"[demo] detection: {found['photos']} photos in {found['seconds']:.1f} s; boxes at IoU "
        f"0.5 recall {_show(boxes.get('recall'))}, precision {_show(boxes.get('precision'))}; "
        f"two stages (detector, then species on crops): accuracy {judged['accuracy']:.3f} on "
        f"{judged['photos']} held-out photos, empty ones among them; {seconds:.1f} s in all"
    )
    return {
        "detection_recall": boxes.get("recall"),
        "detection_precision": boxes.get("precision"),
        "empty_filter": metrics["empty_filter"],
        "two_stage_accuracy": judged["accuracy"],
        "two_stage_photos": classified["photos"],
    }
