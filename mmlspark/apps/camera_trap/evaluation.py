"""The `evaluate` command: metrics of classify or detect results against the truth, and
the charts (confusion matrix, sample photos) drawn with OpenCV."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap import _charts, _jvm, store
from mmlspark.apps.camera_trap.labels import CctLabels, with_labels
from mmlspark.apps.camera_trap.results import committed, current
from mmlspark.apps.camera_trap.settings import EMPTY, JobError, Log
from mmlspark.apps.camera_trap.store import FolderError, OutputLock, RunFolder, atomic_write
from mmlspark.core.backend import files_in_python

#: What evaluate writes into its --out.
EVALUATION_FILES = frozenset({"metrics.json", "confusion_matrix.png", "samples.png"})


#: The temporary names its files are written under before a rename (".samples.1a2b3c4d.png"),
#: which a run that was killed leaves behind.
_EVALUATION_TEMPORARY = re.compile(
    r"\.(metrics\.json|confusion_matrix|samples)\.[0-9a-f]{8}\.(tmp|png)"
)


@contextmanager
def _replaced(target: Path) -> Iterator[str]:
    """A temporary path beside `target` (same extension: the chart writers pick the format by
    it) to write to, moved over `target` with one rename when the block ends without error."""
    temporary = target.with_name(f".{target.stem}.{uuid.uuid4().hex[:8]}{target.suffix}")
    try:
        yield str(temporary)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _evaluation_lock(out: str) -> OutputLock:
    """The lock of evaluate's --out, after checking that the folder is new, empty or holds only
    evaluate's own files (regular files, no links): what else is there is never overwritten."""
    folder = Path(out)
    if os.path.lexists(folder) and not folder.is_dir():
        raise JobError(f"--out {out} is not a folder; choose a folder for the metrics")
    if folder.is_dir():
        foreign = sorted(
            p.name
            for p in folder.iterdir()
            if p.name not in (store.LOCK, store.EXCLUSIVE_LOCK)
            and not (_EVALUATION_TEMPORARY.fullmatch(p.name) and p.is_file())
            and (p.name not in EVALUATION_FILES or p.is_symlink() or not p.is_file())
        )
        if foreign:
            raise JobError(
                f"{out} is not empty and is not an evaluate output ({len(foreign)} entries, e.g. "
                f"{', '.join(foreign[:3])}); choose a new or empty folder for --out"
            )
    folder.mkdir(parents=True, exist_ok=True)
    return OutputLock(folder)


def evaluate(
    spark: SparkSession,
    predictions: str,
    out: str,
    *,
    labels: str | None = None,
    threshold: float | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Metrics of classify results against the truth; of detect results, see
    :func:`evaluate_detections` (`threshold` is theirs: by default 0.2). Two-stage classify
    results get both: the classes of the photos (empty among them) and the detections' (by
    default at the run's crop threshold). `out` is locked while it is written, and refused when
    it holds anything evaluate does not write; metrics.json is replaced atomically."""
    try:
        lock = _evaluation_lock(out).__enter__()
    except FolderError as e:
        raise JobError(str(e)) from None
    try:
        return _evaluate(spark, predictions, out, labels=labels, threshold=threshold, log=log)
    finally:
        lock.__exit__()


def _evaluate(
    spark: SparkSession,
    predictions: str,
    out: str,
    *,
    labels: str | None,
    threshold: float | None,
    log: Log,
) -> dict[str, Any]:
    try:
        folder = RunFolder(Path(predictions))
    except FolderError as e:
        raise JobError(str(e)) from None
    table = committed(spark, folder)
    if folder.manifest is None or table is None:
        raise JobError(f"{predictions} holds no classify results (no run.json or no predictions)")
    run = folder.manifest
    table = table.filter("frame_number IS NULL")  # videos' frames are not evaluated (yet)
    detected: dict[str, Any] = {}
    if "detector" in run:
        default = run["threshold"] if "model" in run else 0.2
        detected = evaluate_detections(
            spark,
            table,
            run,
            out,
            labels=labels,
            threshold=default if threshold is None else threshold,
            log=log,
        )
        if "model" not in run:
            return detected
    scored = current(table)
    if labels is None:
        truth = scored.withColumn("label", F.regexp_extract("path", r"/([^/]+)/[^/]+$", 1))
    else:
        truth = with_labels(spark, scored, run["images"], labels)
    judged = truth.filter(
        "failure IS NULL AND label IS NOT NULL AND label != ''"
    ).withColumnRenamed("predicted_label", "prediction")
    stats = class_metrics(judged, "label", "prediction")
    metrics = {
        "photos": judged.count(),
        "failures": scored.filter("failure IS NOT NULL").count(),
        "bursts": run.get("bursts", "off"),
        **stats,
    }
    if metrics["bursts"] != "off":
        # The effect of burst ensembling: the same photos judged by their own predictions.
        metrics["accuracy_per_photo"] = class_metrics(judged, "label", "image_label")["accuracy"]
    atomic_write(Path(out) / "metrics.json", json.dumps({**detected, **metrics}, indent=1))
    # The detections' samples.png (boxes and species) stays where there are detections.
    draw_plots(spark, judged, metrics, Path(out), samples=not detected)
    log(f"[evaluate] {metrics['photos']} photos: accuracy {metrics['accuracy']:.3f}")
    if "accuracy_per_photo" in metrics:
        log(
            f"[evaluate] burst ensembling ({metrics['bursts']}): accuracy "
            f"{metrics['accuracy_per_photo']:.3f} per photo -> {metrics['accuracy']:.3f} per burst"
        )
    for name in stats["labels"]:
        log(
            f"[evaluate]   {name:>10}: precision {metrics['precision_per_class'][name]:.3f}, "
            f"recall {metrics['recall_per_class'][name]:.3f}"
        )
    return metrics


def class_metrics(judged: DataFrame, label_col: str, prediction_col: str) -> dict[str, Any]:
    """Accuracy, the classes (every one seen as a label or a prediction, sorted), per-class
    precision and recall (0 where nothing was predicted or labelled as a class) and the confusion
    matrix (rows: true class, columns: predicted) of `judged`, from its counts per pair."""
    pairs = judged.groupBy(label_col, prediction_col).count().collect()
    labels = sorted({r[0] for r in pairs} | {r[1] for r in pairs})
    at = {name: i for i, name in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for truth, predicted, count in pairs:
        matrix[at[truth]][at[predicted]] += count
    right = [matrix[i][i] for i in range(len(labels))]
    predicted = [sum(row[j] for row in matrix) for j in range(len(labels))]

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    return {
        "accuracy": ratio(sum(right), sum(map(sum, matrix))),
        "labels": labels,
        "precision_per_class": {n: ratio(right[i], predicted[i]) for i, n in enumerate(labels)},
        "recall_per_class": {n: ratio(right[i], sum(matrix[i])) for i, n in enumerate(labels)},
        "confusion_matrix": matrix,
    }


def box_iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two [x, y, width, height] boxes."""
    iw = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    ih = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def evaluate_detections(
    spark: SparkSession,
    table: DataFrame,
    run: dict[str, Any],
    out: str,
    *,
    labels: str | None = None,
    threshold: float = 0.2,
    log: Log = print,
) -> dict[str, Any]:
    """Metrics of detect results: the empty filter (a photo is non-empty when a detection
    reaches `threshold`) against the truth (CCT categories, or the photo's folder: 'empty'), and
    with CCT boxes, detection precision and recall at IoU 0.5 (detections at or over
    `threshold`, matched greedily, most confident first, one truth box each). samples.png draws
    the detections of up to 16 photos, mistakes first."""
    cct = CctLabels.read(labels) if labels else None
    root = run["images"]
    prefix = root + "/"
    scored = current(table).filter("failure IS NULL").select("path", "detections")
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    boxes = {"detections": 0, "truth": 0, "matched": 0}
    samples: list[tuple[bool, dict[str, Any]]] = []
    for row in scored.orderBy("path").toLocalIterator():
        relative = row.path[len(prefix) :] if row.path.startswith(prefix) else row.path
        if cct is not None:
            if relative not in cct.labels or relative in cct.corrupt:
                continue
            truly = cct.labels[relative] != EMPTY
        else:
            truly = relative.split("/")[-2:-1] != [EMPTY]
        found = [d for d in row.detections if d.conf >= threshold]
        said = bool(found)
        key = {(True, True): "tp", (True, False): "fn", (False, True): "fp", (False, False): "tn"}
        counts[key[(truly, said)]] += 1
        right = truly == said
        if cct is not None and relative in cct.boxes:
            truth = cct.boxes[relative]
            unmatched = list(range(len(truth)))
            for d in sorted(found, key=lambda d: -d.conf):
                best = max(unmatched, key=lambda i: box_iou(d.bbox, truth[i]), default=None)
                if best is not None and box_iou(d.bbox, truth[best]) >= 0.5:
                    unmatched.remove(best)
                    boxes["matched"] += 1
            boxes["detections"] += len(found)
            boxes["truth"] += len(truth)
            right = right and not unmatched and len(found) == len(truth)
        elif cct is not None:
            boxes["detections"] += len(found)
        if len(samples) < 64:
            caption = ("animal" if said else "empty") + ("" if truly == said else " (wrong)")
            samples.append(
                (
                    right,
                    {
                        "path": row.path,
                        "caption": caption,
                        "boxes": [
                            {"bbox": list(d.bbox), "label": f"{_box_label(d)} {d.conf:.2f}"}
                            for d in found
                        ],
                    },
                )
            )
    photos = sum(counts.values())
    if not photos:
        raise JobError("no detected photo has a known truth to compare with")
    metrics: dict[str, Any] = {
        "photos": photos,
        "failures": current(table).filter("failure IS NOT NULL").count(),
        "threshold": threshold,
        "empty_filter": {
            "nonempty_precision": _ratio(counts["tp"], counts["tp"] + counts["fp"]),
            "nonempty_recall": _ratio(counts["tp"], counts["tp"] + counts["fn"]),
            "empty_precision": _ratio(counts["tn"], counts["tn"] + counts["fn"]),
            "empty_recall": _ratio(counts["tn"], counts["tn"] + counts["fp"]),
            **counts,
        },
    }
    if boxes["truth"]:
        metrics["detection_iou50"] = {
            "precision": _ratio(boxes["matched"], boxes["detections"]),
            "recall": _ratio(boxes["matched"], boxes["truth"]),
            **boxes,
        }
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / "metrics.json", json.dumps(metrics, indent=1))
    chosen = [s for ok, s in samples if not ok] + [s for ok, s in samples if ok]
    if chosen:
        with _replaced(out_dir / "samples.png") as path:
            _charts_of(spark).draw_image_grid(
                samples=chosen[:16], columns=4, cell_size=160, path=path
            )
    f = metrics["empty_filter"]
    log(
        f"[evaluate] {photos} photos, threshold {threshold}: empty filter finds animals with "
        f"precision {_show(f['nonempty_precision'])} and recall {_show(f['nonempty_recall'])}"
    )
    if "detection_iou50" in metrics:
        d = metrics["detection_iou50"]
        log(
            f"[evaluate] boxes at IoU 0.5: precision {_show(d['precision'])}, recall "
            f"{_show(d['recall'])} ({d['matched']} of {d['truth']} drawn boxes found)"
        )
    return metrics


def _box_label(detection: Any) -> str:
    """What a box is: its species when it was classified, else the detector's label."""
    species = detection.asDict().get("classifications")
    return species[0].label if species else detection.label


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


class _JvmCharts:
    """The charts drawn by the jar's OpenCV, with the Python module's signatures."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def draw_confusion_matrix(self, **kwargs: Any) -> None:
        _jvm.draw_confusion_matrix(self.spark, **kwargs)

    def draw_image_grid(self, **kwargs: Any) -> None:
        _jvm.draw_image_grid(self.spark, **kwargs)


def _charts_of(spark: SparkSession) -> Any:
    """Who draws the charts: the jar's OpenCV, or (without it) opencv-python on the driver."""
    return _charts if files_in_python(spark) else _JvmCharts(spark)


def draw_plots(
    spark: SparkSession,
    judged: DataFrame,
    metrics: dict[str, Any],
    out: Path,
    *,
    samples: bool = True,
) -> None:
    """`confusion_matrix.png`, and with `samples` `samples.png`: up to 16 photos, mistakes first,
    captioned "predicted (true ...)"; drawn by the library's OpenCV, so no plotting package is
    needed."""
    charts = _charts_of(spark)
    with _replaced(out / "confusion_matrix.png") as path:
        charts.draw_confusion_matrix(
            labels=metrics["labels"], matrix=metrics["confusion_matrix"], path=path
        )
    if not samples:
        return
    wrong = judged.filter("prediction != label").orderBy("path").limit(16).collect()
    right = judged.filter("prediction = label").orderBy("path").limit(16 - len(wrong)).collect()
    chosen = [
        {
            "path": r.path,
            "caption": r.prediction + ("" if r.prediction == r.label else f" (true {r.label})"),
        }
        for r in wrong + right
    ]
    if chosen:
        with _replaced(out / "samples.png") as path:
            charts.draw_image_grid(samples=chosen, columns=4, cell_size=128, path=path)
