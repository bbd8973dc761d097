"""The camera-trap classification job: train, classify, evaluate, and the demo that runs all three.

Training reads photos labelled by sub-folder or by a COCO Camera Traps (CCT) JSON, and fits
``ImageFeaturizer`` (an ONNX model cut at a feature node) followed by a logistic regression over
the sorted class names (``IndexToString`` turns its index back into a name); the fitted pipeline,
model bytes included, is saved as one directory that either backend loads.

The job runs on either backend: with the jar (classic sessions, Connect servers that have it),
and without it on the Python backend (``--backend python``, or any session that cannot load the
jar), where files are listed by Spark's ``binaryFile`` source and read, decoded and scored by the
Python workers, and the charts are drawn on the driver with opencv-python.
Classifying scores photos and writes predictions as Parquet and CSV plus a MegaDetector-format
results JSON; it resumes an interrupted run. Evaluating compares predictions with ground truth.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.ml import PipelineModel
from pyspark.ml.classification import LogisticRegression, LogisticRegressionModel
from pyspark.ml.feature import IndexToString
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap import _charts, _jvm, store
from mmlspark.apps.camera_trap.listing import HIDDEN_SKIPPED, hidden_entries, local_path
from mmlspark.apps.camera_trap.store import (
    FolderError,
    OutputLock,
    RunFolder,
    atomic_write,
    content_hash,
    inside,
)
from mmlspark.core.backend import files_in_python
from mmlspark.core.jvm import jvm_alive, qualified_path
from mmlspark.core.session import default_parallelism
from mmlspark.detection import CropDetections, ObjectDetector
from mmlspark.image import ImageDecoder, ImageFeaturizer, list_files, read_files
from mmlspark.stages import EnsembleByKey
from mmlspark.train import TrainedClassifierModel

TOP_K = 3
EMPTY = "empty"
Log = Callable[[str], None]


class JobError(Exception):
    """A problem with the job's inputs, found before any Spark work."""


def spark_session(
    master: str | None, remote: str | None = None, backend: str | None = None
) -> SparkSession:
    """Local Spark unless told otherwise; under spark-submit, the session it configured; with
    `remote`, a Spark Connect session. `backend` (auto, jvm, python) is where the stages run."""
    if backend is not None:
        mmlspark.set_backend(backend)
    if remote is not None:
        return SparkSession.builder.remote(remote).appName("mmlspark-camera-trap").getOrCreate()
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:  # launched by spark-submit
        return SparkSession.builder.getOrCreate()
    return mmlspark.session(master or "local[*]", app_name="mmlspark-camera-trap")


def _qualified(spark: SparkSession, path: str) -> str:
    """The path as Spark reports file paths (`file:/...` for local ones), without a trailing /.
    Without the jar a path without a scheme is taken as a local one, made absolute here (a Spark
    Connect server resolves relative paths from its own folder)."""
    if not files_in_python(spark):
        return qualified_path(spark, path)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path):
        return path.rstrip("/")
    return "file:" + os.path.abspath(path).rstrip("/")


def _cancel_all(spark: SparkSession) -> None:
    """Cancels the session's running Spark jobs."""
    from pyspark.sql.utils import is_remote

    if is_remote():
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


@dataclass
class CctLabels:
    """Ground truth from a COCO Camera Traps JSON: file name -> category, its sequences, the
    times its photos were taken and the boxes of its annotations."""

    labels: dict[str, str]
    sequences: dict[str, str]
    corrupt: set[str]
    #: Annotations naming an image or category the file does not have (left out, not fatal).
    dangling: int = 0
    #: File name -> the boxes of its annotations that have one, [x, y, width, height] as
    #: fractions of the image (CCT writes pixels; images without width and height are left out).
    boxes: dict[str, list[list[float]]] = field(default_factory=dict)
    #: File name -> the image's `datetime` in seconds (its local time read as UTC).
    times: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def read(path: str) -> CctLabels:
        try:
            data = json.loads(Path(path).read_text())
            categories = {c["id"]: c["name"] for c in data["categories"]}
            names = {i["id"]: i["file_name"] for i in data["images"]}
            labels: dict[str, str] = {}
            dangling = 0
            for a in data.get("annotations", []):
                if a.get("image_id") in names and a.get("category_id") in categories:
                    labels.setdefault(names[a["image_id"]], categories[a["category_id"]])
                else:
                    dangling += 1
            sequences = {i["file_name"]: str(i["seq_id"]) for i in data["images"] if "seq_id" in i}
            times = {
                i["file_name"]: seconds
                for i in data["images"]
                if (seconds := _cct_seconds(i.get("datetime"))) is not None
            }
            corrupt = {i["file_name"] for i in data["images"] if i.get("corrupt")}
            sizes = {
                i["id"]: (float(i["width"]), float(i["height"]))
                for i in data["images"]
                if i.get("width") and i.get("height")
            }
            boxes: dict[str, list[list[float]]] = {}
            for a in data.get("annotations", []):
                if a.get("bbox") is not None and a.get("image_id") in sizes:
                    w, h = sizes[a["image_id"]]
                    x, y, bw, bh = (float(v) for v in a["bbox"])
                    boxes.setdefault(names[a["image_id"]], []).append(
                        [x / w, y / h, bw / w, bh / h]
                    )
        except RecursionError:
            raise JobError(
                f"cannot read COCO Camera Traps labels from {path}: nested too deeply"
            ) from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise JobError(f"cannot read COCO Camera Traps labels from {path}: {e!r}") from None
        return CctLabels(labels, sequences, corrupt, dangling, boxes, times)


def _cct_seconds(value: Any) -> float | None:
    """A CCT `datetime` ("2024-05-01 10:00:00", or EXIF's "2024:05:01 10:00:00") in seconds,
    read as UTC; None when absent or not a time."""
    if not isinstance(value, str):
        return None
    for pattern in ("%Y-%m-%d %H:%M:%S", "%Y:%m:%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            parsed = datetime.datetime.strptime(value.strip()[:19], pattern)
        except ValueError:
            continue
        return parsed.replace(tzinfo=datetime.timezone.utc).timestamp()
    return None


def with_labels(spark: SparkSession, df: DataFrame, images: str, labels: str | None) -> DataFrame:
    """Adds `relative_path` and `label`: the CCT category, or the photo's folder name."""
    root = _qualified(spark, images)
    df = df.withColumn("relative_path", F.expr(f"substring(path, {len(root) + 2})"))
    if labels is None:
        return df.withColumn("label", F.regexp_extract("path", r"/([^/]+)/[^/]+$", 1))
    cct = CctLabels.read(labels)
    # Photos the survey marked corrupt are neither trained on nor judged.
    known = sorted((f, label) for f, label in cct.labels.items() if f not in cct.corrupt)
    truth = spark.createDataFrame(known, "relative_path string, label string")
    # Broadcast: a shuffle join would leave the photos in spark.sql.shuffle.partitions pieces.
    return df.join(F.broadcast(truth), "relative_path", "left")


def train(
    spark: SparkSession,
    images: str,
    featurizer: str,
    model_out: str,
    *,
    labels: str | None = None,
    feature_node: str | None = "pool",
    image_size: int = 96,
    detector: str | None = None,
    threshold: float = 0.2,
    log: Log = print,
) -> tuple[PipelineModel, dict[str, Any]]:
    """Fits and saves the pipeline; returns it and counts (photos, failures, seconds). With a
    `detector`, the classifier learns from the crops of the detections (animals, at or over
    `threshold`) on the labelled photos that are not empty, each crop labelled as its photo;
    classify then needs the same detector."""
    try:
        model_bytes = Path(featurizer).read_bytes()
    except OSError as e:
        raise JobError(f"cannot read the featurizer model {featurizer}: {e}") from None
    check_model_folder(Path(model_out))
    found = load_detector(spark, detector) if detector else None
    start = time.perf_counter()
    featurize = ImageFeaturizer(
        inputCol="crop" if found else "image",
        outputCol="features",
        imageHeight=image_size,
        imageWidth=image_size,
        errorCol="featurizeError",
        dropNa=False,  # classify keeps every photo: a failed one gets its reason, not dropped
    ).setModelPayload(model_bytes)
    if feature_node:
        featurize.setFeatureTensorName(feature_node)
    if found is None:
        model, counts = _fit_on_photos(spark, images, labels, image_size, featurize, log)
    else:
        model, counts = _fit_on_crops(spark, images, labels, found, threshold, featurize, log)
    mmlspark.save_pipeline(model, model_out, overwrite=True)
    seconds = time.perf_counter() - start
    log(
        f"[train] classes {_levels(model)}; fitted in {seconds:.1f} s "
        f"({counts['usable'] / seconds:.1f} photos/s); model saved to {model_out}"
    )
    summary = {
        "photos": counts["usable"],
        "failures": counts["all"] - counts["decoded"],
        "seconds": round(seconds, 2),
    }
    return model, summary


def _labelled(spark: SparkSession, images: str, labels: str | None, decoder: Any) -> DataFrame:
    """The photos under `images` read with `decoder`, with `relative_path` and `label`."""
    listing = list_files(spark, _qualified(spark, images))
    return with_labels(spark, read_files(listing, decoder), images, labels)


#: The columns of the class index the logistic regression learns and predicts.
LABEL_INDEX, PREDICTION_INDEX = "label_index", "prediction_index"


def _fit_classifier(rows: DataFrame) -> list[Any]:
    """The classifier stages fitted on `rows` (`features`, `label`): a logistic regression over
    the classes' index in sorted order, then `IndexToString` to the class name ('prediction';
    'probability' in the same order)."""
    levels = sorted(r.label for r in rows.select("label").distinct().collect())
    position = F.expr(f"array_position({_sql_strings(levels)}, label)")  # 3.5 takes no Column
    indexed = rows.withColumn(LABEL_INDEX, (position - 1).cast("double"))
    regression = LogisticRegression(
        maxIter=200,
        regParam=0.01,
        featuresCol="features",
        labelCol=LABEL_INDEX,
        predictionCol=PREDICTION_INDEX,
    )
    names = IndexToString(inputCol=PREDICTION_INDEX, outputCol="prediction", labels=levels)
    return [regression.fit(indexed), names]


def _fit_on_photos(
    spark: SparkSession,
    images: str,
    labels: str | None,
    image_size: int,
    featurize: ImageFeaturizer,
    log: Log,
) -> tuple[PipelineModel, dict[str, int]]:
    """The whole-photo classifier and the counts of files, decodable and usable photos."""
    # Photos are decoded at the smallest JPEG scale that still covers the featurizer's input.
    decoder = ImageDecoder(minHeight=image_size, minWidth=image_size)
    photos = _labelled(spark, images, labels, decoder).cache()
    wanted = "image IS NOT NULL AND label IS NOT NULL AND label != ''"
    counts = photos.agg(
        F.count("*").alias("all"),
        F.count("image").alias("decoded"),
        F.sum(F.expr(f"CAST({wanted} AS INT)")).alias("usable"),
    ).first()
    assert counts is not None
    log(
        f"[train] {counts['all']} files, {counts['all'] - counts['decoded']} not decodable, "
        f"{counts['usable']} labelled photos"
    )
    if not counts["usable"]:
        raise JobError(f"no labelled photos under {images}")
    featured = featurize.transform(photos.filter(wanted).select("path", "image", "label"))
    try:
        fitted = _fit_classifier(
            featured.filter("features IS NOT NULL").select("features", "label")
        )
    finally:
        photos.unpersist()
    return PipelineModel([featurize, *fitted]), counts.asDict()


def _fit_on_crops(
    spark: SparkSession,
    images: str,
    labels: str | None,
    found: LoadedDetector,
    threshold: float,
    featurize: ImageFeaturizer,
    log: Log,
) -> tuple[PipelineModel, dict[str, int]]:
    """The classifier of detection crops: photos are read and detected once, their crops
    featurized in the same pass and only the features kept for fitting."""
    photos = _labelled(spark, images, labels, found.decoder(CROP_DECODE_SCALE))
    # Only labelled, non-empty photos are worth detecting: the others keep a row for counting.
    wanted = F.expr(f"image IS NOT NULL AND label IS NOT NULL AND label NOT IN ('', '{EMPTY}')")
    photos = photos.withColumn("wanted", wanted).withColumn(
        "image", F.when(F.col("wanted"), F.col("image"))
    )
    cropped = found.cropper(threshold).transform(found.stage.transform(photos))
    rows = (
        featurize.transform(cropped).select("path", "label", "error", "wanted", "features").cache()
    )
    try:
        counts = rows.agg(
            F.countDistinct("path").alias("all"),
            F.countDistinct(F.when(F.col("error").isNull(), F.col("path"))).alias("decoded"),
            F.countDistinct(F.when(F.col("wanted"), F.col("path"))).alias("usable"),
            F.count(F.when(F.col("wanted") & F.col("features").isNotNull(), 1)).alias("crops"),
        ).first()
        assert counts is not None
        log(
            f"[train] {counts['all']} files, {counts['all'] - counts['decoded']} not decodable, "
            f"{counts['usable']} labelled photos with an animal, {counts['crops']} crops of "
            f"detections at or over {threshold}"
        )
        if not counts["crops"]:
            raise JobError(
                f"no detection at or over {threshold} on the labelled photos under {images}"
            )
        fitted = _fit_classifier(rows.filter("wanted AND features IS NOT NULL"))
    finally:
        rows.unpersist()
    return PipelineModel([featurize, *fitted]), counts.asDict()


def check_model_folder(folder: Path) -> None:
    """Saving a model replaces its folder: refuse a folder that holds anything else."""
    if folder.exists() and not folder.is_dir():
        raise JobError(f"--model-out {folder} is a file, not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        metadata = folder / "metadata" / "part-00000"
        try:
            saved = json.loads(metadata.read_text().splitlines()[0])["class"]
        except (OSError, ValueError, KeyError, IndexError):
            saved = None
        if saved != "org.apache.spark.ml.PipelineModel" or any(
            entry.name not in ("metadata", "stages") for entry in folder.iterdir()
        ):
            raise JobError(
                f"--model-out {folder} is not empty and is not a saved model (saving replaces "
                "the whole folder); choose a new or empty folder"
            )


def classified(model: PipelineModel, rows: DataFrame) -> DataFrame:
    """`rows` through the trained pipeline; a row the featurizer failed on (null `features`: an
    unreadable photo, a photo without a crop) keeps null `probability` and `prediction` (Spark's
    logistic regression cannot take a null vector, so such rows pass it as zeros)."""
    featurizer, *classifier = model.stages
    regression = classifier[0] if classifier else None
    if not isinstance(regression, LogisticRegressionModel):
        return model.transform(rows)  # a TrainedClassifierModel takes the nulls itself
    zeros = array_to_vector(F.array_repeat(F.lit(0.0), regression.numFeatures))
    featured = featurizer.transform(rows).withColumn("_featured", F.col("features").isNotNull())
    featured = featured.withColumn("features", F.coalesce(F.col("features"), zeros))
    out = PipelineModel(classifier).transform(featured)
    for name in ("rawPrediction", "probability", PREDICTION_INDEX, "prediction"):
        out = out.withColumn(name, F.when(F.col("_featured"), F.col(name)))
    return out.withColumn("features", F.when(F.col("_featured"), F.col("features"))).drop(
        "_featured"
    )


def _levels(model: PipelineModel) -> list[str]:
    """The classes of a trained pipeline (its last stage is an IndexToString, or, in models of
    mmlspark 0.x, a TrainedClassifierModel)."""
    last = model.stages[-1]
    if isinstance(last, IndexToString):
        return list(last.getLabels())
    if isinstance(last, TrainedClassifierModel):
        return list(last.getLevels())
    raise JobError(f"the model's last stage is a {type(last).__name__}, not a trained classifier")


@dataclass
class ClassifySettings:
    """How a resumable run (classify, detect) goes. It commits every `commit_every` photos or,
    by estimate, every `commit_seconds` seconds, whichever comes first: the size of each commit
    is set from the rate measured so far, so a commit aims at 0.8 `commit_seconds` and can run
    over it when the rate drops. `retry_failures` scores again the photos whose committed row is
    a failure; `prune_missing` drops the committed rows of photos no longer listed under
    --images (by default they stay, counted as missing). Names starting with '.' or '_' under a
    local --images are failure rows saying they were skipped; `include_hidden` scores them."""

    commit_every: int = 500
    commit_seconds: float = 60.0
    retry_failures: bool = False
    prune_missing: bool = False
    include_hidden: bool = False


@dataclass
class _Work:
    """What a resumable run computes per photo and renders at the end: `score` turns listed
    photos (path, length, modificationTime, burst, unit) into rows of `schema` without its
    `commit` column, and `outputs` writes the result files from the committed table."""

    command: str
    schema: str
    score: Callable[[DataFrame], DataFrame]
    outputs: Callable[[SparkSession, DataFrame, RunFolder], None]


def _classify_work(model: PipelineModel, levels: list[str], ensemble: bool) -> _Work:
    height, width = featurizer_size(model)
    decoder = ImageDecoder(minHeight=height, minWidth=width)

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder) -> None:
        assert folder.manifest is not None
        write_outputs(spark, rows, folder, levels, folder.manifest["images"])

    return _Work(
        "classify",
        SCHEMA,
        lambda photos: score(photos, model, levels, decoder, ensemble),
        outputs,
    )


class Interrupted(Exception):
    """A signal asked the run to stop; what was committed stays."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _StopOnSignal:
    """Turns SIGINT and SIGTERM into a prompt, clean stop: the running Spark jobs are cancelled
    (their tasks end their ONNX Runtime runs) and the loop stops before the next commit."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            # From a thread of its own: a handler runs on the main thread, whose py4j connection
            # (one per thread) is waiting for the answer of the call the signal interrupted;
            # a second command on it would garble both.
            threading.Thread(target=_cancel_all, args=(self.spark,), daemon=True).start()

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():  # where Python allows handlers
            for s in (signal.SIGINT, signal.SIGTERM):
                self.previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def check_folders(images: str, out: Path) -> None:
    """Refuses an --out that is a file, or that lies inside --images or holds it."""
    if out.exists() and not out.is_dir():
        raise JobError(f"--out {out} is a file, not a folder; choose a folder for the results")
    local = local_path(images)
    if local is None or not local.exists():
        return
    if inside(out, local) or inside(local, out):
        raise JobError(
            f"--out {out} and --images {images} overlap (one lies inside the other); results "
            "must go to a folder outside the photos, e.g. next to them"
        )


def _model_identity(model_dir: str, model: PipelineModel) -> dict[str, str]:
    """What identifies a saved model whatever its path: the SHA-256 of its files where they are
    local; elsewhere (hdfs:, s3a:, ...) the pipeline's uid, which a save keeps and a new
    training draws afresh."""
    local = local_path(model_dir)
    if local is not None and local.is_dir():
        return {"model_sha256": content_hash(local)}
    return {"model_uid": str(model.uid)}


#: Settings that name where a model is, not what it is: a run is identified by the rest.
_LOCATIONS = ("model", "detector")
#: What a manifest holds besides the run's settings: its marker, run id and file lists.
_BOOKKEEPING = ("format", "layout", "run_id", "files", "staging")


def _identity(run: dict[str, Any]) -> dict[str, Any]:
    """The settings that identify a run (a run dict, or a manifest)."""
    return {k: v for k, v in run.items() if k not in _LOCATIONS + _BOOKKEEPING}


def _changes(before: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between two runs' identities, in words."""
    said = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if old == new:
            continue
        if key.endswith("_sha256"):
            what = key[: -len("_sha256")]
            where = ", same path" if before.get(what) == now.get(what) else ""
            said.append(
                f"the {what}'s content changed (sha256 {str(old)[:12]}... then, "
                f"{str(new)[:12]}... now{where})"
            )
        else:
            said.append(f"{key} was {old!r}, now {new!r}")
    return "; ".join(said)


def open_folder(out: Path, run: dict[str, Any], overwrite: bool) -> RunFolder:
    """The output folder for `run`, checked but not yet changed: new, empty, or holding results
    of the same run (resumed), or with `overwrite` results of another run of this job (their
    files are removed by `begin`, once the inputs are known to be usable). A folder holding
    anything this job did not write, or a manifest it cannot prove it wrote, is refused."""
    try:
        folder = RunFolder(out)
    except FolderError as e:
        raise JobError(f"{e}; nothing in {out} was changed") from None
    if folder.manifest is None:
        count, names = folder.foreign_files()
        if count:
            raise JobError(
                f"{out} is not empty and is not a results folder of this job ({count} entries, "
                f"e.g. {', '.join(names)}); choose a new or empty folder for --out"
            )
        return folder
    before = _identity(folder.manifest)
    if before != _identity(run) and not overwrite:
        raise JobError(
            f"{out} holds results of another run: {_changes(before, _identity(run))}. Results "
            "of two runs are never mixed: choose another --out for this run, or pass --overwrite "
            "to replace the earlier results (only the files its run.json lists are removed)"
        )
    return folder


def begin(folder: RunFolder, run: dict[str, Any], overwrite: bool, log: Log) -> None:
    """Starts `run` in the checked `folder`: with `overwrite` the earlier run's own files go
    first; staging left by a killed run is cleared."""
    if overwrite and folder.manifest is not None:
        removed = folder.remove_own_files()
        log(f"[run] --overwrite: removed {removed} files of the earlier results in {folder.folder}")
    folder.start(run)
    folder.clean_staging()


def _featurizer(model: PipelineModel) -> ImageFeaturizer | None:
    """The model's featurizer stage, if it has one."""
    return next((s for s in model.stages if isinstance(s, ImageFeaturizer)), None)


def featurizer_size(model: PipelineModel) -> tuple[int, int]:
    """The image size the model's featurizer resizes to (0, 0 when it has none)."""
    stage = _featurizer(model)
    return (0, 0) if stage is None else (stage.getImageHeight(), stage.getImageWidth())


def committed(spark: SparkSession, folder: RunFolder) -> DataFrame | None:
    """Every committed row (a photo may have several: the latest commit is current)."""
    parts = folder.parts()
    if not parts:
        return None
    return spark.read.parquet(*[str(p) for p in parts])


def current(table: DataFrame) -> DataFrame:
    """One row per photo: the one of its latest commit."""
    latest = Window.partitionBy("path").orderBy(F.col("commit").desc())
    return table.withColumn("_rank", F.row_number().over(latest)).filter("_rank = 1").drop("_rank")


def classify(
    spark: SparkSession,
    images: str,
    model_dir: str,
    out: str,
    *,
    overwrite: bool = False,
    bursts: str = "off",
    cct: str | None = None,
    burst_gap: float = 3.0,
    detector: str | None = None,
    threshold: float = 0.2,
    wait: bool = False,
    settings: ClassifySettings | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Scores the photos under `images` into `out`, committing as it goes; a second call with
    the same arguments continues where the first stopped and ends with exactly one row per
    photo. With `bursts` 'cct' (sequences from the `cct` JSON's seq_id) or 'time' (photos of
    one folder taken at most `burst_gap` seconds apart, by EXIF time, see `with_bursts`) the
    probabilities of a burst's photos are averaged and the burst's class is every photo's
    prediction; `image_label` keeps each photo's own.

    With a `detector` (and a model trained on its crops, `train --detector`) the photos are
    detected first and the crops of animal detections at or over `threshold` classified; see
    `score_two_stage` for the class each photo gets. results.json then holds every detection
    (down to 0.005) with the classified ones' `classifications`."""
    settings = settings or ClassifySettings()
    if bursts not in ("off", "cct", "time"):
        raise JobError(f"--bursts must be off, cct or time, not {bursts!r}")
    if bursts == "cct" and cct is None:
        raise JobError("--bursts cct needs --cct, the COCO Camera Traps JSON with seq_id")
    cct_labels = CctLabels.read(cct) if cct else None
    check_folders(images, Path(out))
    try:
        model = mmlspark.load_pipeline(model_dir)
        levels = _levels(model)
    except Exception as e:  # noqa: BLE001 - any failure to load is reported the same way
        raise JobError(f"cannot load a camera-trap model from {model_dir}: {e}") from None
    featurizer = _featurizer(model)
    # A model trained on detections (train --detector) featurizes the 'crop' column.
    on_crops = featurizer is not None and featurizer.getInputCol() == "crop"
    if on_crops and detector is None:
        raise JobError(
            f"the model in {model_dir} was trained on detection crops (train --detector); "
            "classify with it needs --detector, the same detector"
        )
    if detector is not None and not on_crops:
        raise JobError(
            f"the model in {model_dir} was trained on whole photos; classify --detector needs a "
            "model trained on crops: train --detector"
        )
    run: dict[str, Any] = {
        "images": _qualified(spark, images),
        "model": str(Path(model_dir).resolve()),
        **_model_identity(model_dir, model),
        "bursts": bursts if bursts != "time" else f"time:{burst_gap}",
    }
    if detector is None:
        work = _classify_work(model, levels, bursts != "off")
    else:
        found = load_detector(spark, detector)
        run.update(
            detector=found.path,
            detector_sha256=content_hash(found.path),
            threshold=threshold,
            image_size=found.size,
        )
        work = _two_stage_work(
            model, levels, found, threshold, bursts != "off", Path(model_dir).name
        )
    return _locked_run(spark, work, out, run, overwrite, wait, cct_labels, burst_gap, settings, log)


def _locked_run(
    spark: SparkSession,
    work: _Work,
    out: str,
    run: dict[str, Any],
    overwrite: bool,
    wait: bool,
    cct: CctLabels | None,
    burst_gap: float,
    settings: ClassifySettings | None,
    log: Log,
) -> dict[str, Any]:
    """Runs `work` on the photos of `run` into `out`, holding the folder's lock."""
    out_dir = Path(out)
    if out_dir.is_dir():
        open_folder(out_dir, run, overwrite)  # refuses a folder not ours before writing a lock
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = OutputLock(out_dir, wait=wait).__enter__()
    except FolderError as e:
        raise JobError(str(e)) from None
    folder: RunFolder | None = None
    try:
        folder = open_folder(out_dir, run, overwrite)
        return _run(
            spark, folder, work, run, overwrite, cct, burst_gap, settings or ClassifySettings(), log
        )
    except (OSError, Py4JError) as e:
        if not _disk_full(e):
            raise
        if folder is not None:
            folder.clear_inflight()  # a full disk says nothing about the photos being scored
        raise JobError(
            f"cannot write to {out}: no space left on device. What was committed is kept: free "
            "some space and run the same command to continue"
        ) from None
    finally:
        lock.__exit__()


def _disk_full(e: BaseException) -> bool:
    """Whether `e` (from Python or from a Spark job) says a disk is full."""
    return (isinstance(e, OSError) and e.errno == errno.ENOSPC) or (
        "No space left on device" in str(e)
    )


def _run(
    spark: SparkSession,
    folder: RunFolder,
    work: _Work,
    run: dict[str, Any],
    overwrite: bool,
    cct: CctLabels | None,
    burst_gap: float,
    settings: ClassifySettings,
    log: Log,
) -> dict[str, Any]:
    start = time.perf_counter()
    bursts = run.get("bursts", "off").split(":")[0]
    try:
        listing = _with_hidden(spark, list_files(spark, run["images"]), run, settings)
        if bursts != "off":
            listing = with_bursts(spark, listing, run["images"], bursts, cct, burst_gap)
        else:
            listing = listing.withColumn("burst", F.lit(None).cast("string"))
        # The listing is metadata only: one partition per core keeps the jobs over it (numbering
        # the units, the joins with the committed table) from running a task per few files.
        listing = (
            listing.coalesce(default_parallelism(spark))
            .withColumn("unit", F.coalesce("burst", "path"))
            .cache()
        )
        empty = listing.isEmpty()
    except JobError:
        raise
    except Exception as e:  # noqa: BLE001 - a path that is not there, or cannot be listed
        raise JobError(f"cannot list --images {run['images']}: {_first_line(e)}") from None
    table = committed(spark, folder)
    if empty and (table is not None or overwrite):
        listing.unpersist()
        why = f"{folder.folder} holds results" if table is not None else "--overwrite was asked"
        raise JobError(
            f"--images {run['images']} lists no photos, and {why}: refused, so that an "
            "unmounted card or an empty folder never replaces a survey's results. Check that the "
            "photos are there (mounted, the path spelt right) and run the command again"
        )
    begin(folder, run, overwrite, log)
    if overwrite:
        table = None
    before = 0
    todo = listing
    if table is not None:
        latest = current(table)
        before = latest.join(listing.select("path"), "path", "left_semi").count()
        if settings.retry_failures:
            latest = latest.filter("failure IS NULL")
        elif settings.include_hidden:
            latest = latest.filter(
                ~F.coalesce(F.col("failure"), F.lit("")).startswith(HIDDEN_SKIPPED)
            )
        latest = latest.select("path", "length", "modificationTime")
        same = (
            (todo["path"] == latest["path"])
            & todo["length"].eqNullSafe(latest["length"])
            & todo["modificationTime"].eqNullSafe(latest["modificationTime"])
        )
        todo = todo.join(latest, same, "left_anti")
    scorer = _Scorer(spark, folder, work, settings, log)
    suspects, level, died, vanished = folder.inflight()
    try:
        with _StopOnSignal(spark) as stop:
            scorer.stop = stop
            try:
                if suspects:
                    held = todo.filter(F.col("path").isin(suspects))
                    todo = todo.filter(~F.col("path").isin(suspects))
                    _rescore_suspects(
                        scorer, work.command, held, len(suspects), level, died, vanished
                    )
                scorer.score_all(todo, 0)
            except Exception:
                stop.check()  # a signal's cancelled job fails whichever Spark call was running
                raise
    except Interrupted as e:
        folder.clear_inflight()
        log(
            f"[{work.command}] stopped by {e}: {scorer.scored} photos committed by this run, "
            f"{before + scorer.scored} in {folder.folder}; run the same command to continue"
        )
        listing.unpersist()
        raise
    folder.clear_inflight()
    summary = finish(
        spark, folder, listing, work.outputs, log, work.schema, prune=settings.prune_missing
    )
    listing.unpersist()
    seconds = time.perf_counter() - start
    summary["seconds"] = round(seconds, 2)
    summary["scored"] = scorer.scored
    log(
        f"[{work.command}] {summary['photos']} photos ({summary['failures']} failures) in "
        f"{folder.folder}"
        f"; this run {scorer.scored} photos in {seconds:.1f} s "
        f"({scorer.scored / max(seconds, 1e-9):.1f} photos/s)"
        + (f"; {summary['removed']} photos no longer there dropped" if summary["removed"] else "")
        + (
            f"; {summary['missing']} photos no longer under --images kept (--prune-missing "
            "drops them)"
            if summary["missing"]
            else ""
        )
    )
    return summary


def _with_hidden(
    spark: SparkSession, listing: DataFrame, run: dict[str, Any], settings: ClassifySettings
) -> DataFrame:
    """`listing` with the hidden names under a local --images that Spark's listing leaves out:
    failure rows, or with `include_hidden` ordinary ones (see `listing.hidden_entries`)."""
    extra = hidden_entries(run["images"], include=settings.include_hidden)
    if not extra:
        return listing
    rows = spark.createDataFrame(
        extra, listing.select("path", "length", "modificationTime", "error").schema
    )
    return listing.unionByName(rows.select(*listing.columns))


#: How often a run may vanish unseen (killed from outside, a power cut) while scoring the same
#: photos before they are split to find one that kills the process.
VANISHED_RUNS = 3


def _rescore_suspects(
    scorer: _Scorer,
    command: str,
    held: DataFrame,
    count: int,
    level: int,
    died: bool,
    vanished: int,
) -> None:
    """Scores again the photos an earlier run was scoring when it stopped unseen. A run that saw
    its process die of them (`died`) splits them finer, down to one photo alone; one that died
    of a photo alone makes it a failure row. A run that vanished (no record of why: SIGKILL from
    outside, OOM of the whole driver, power cut) is not held against the photos: they are scored
    as before, and only after `VANISHED_RUNS` such losses on the same photos split finer."""
    if not died and vanished + 1 < VANISHED_RUNS:
        scorer.log(
            f"[{command}] an earlier run stopped while scoring {count} photos; scoring them again"
        )
        scorer.score_all(held, level, vanished=vanished + 1)
    elif level >= 2:
        scorer.record_crashed(held)
    else:
        scorer.log(
            f"[{command}] an earlier run died while scoring {count} photos; scoring them in "
            "smaller parts first"
        )
        scorer.score_all(held, level + 1)


class _Scorer:
    """Scores units of work (a burst, or a photo) in commits, sized to the measured rate."""

    def __init__(
        self,
        spark: SparkSession,
        folder: RunFolder,
        work: _Work,
        settings: ClassifySettings,
        log: Log,
    ) -> None:
        self.spark = spark
        self.folder = folder
        self.work = work
        self.settings = settings
        self.log = log
        self.scored = 0
        self.rate: float | None = None  # photos/s of the commits so far
        self.stop: _StopOnSignal | None = None

    def _chunk_photos(self) -> int:
        cores = default_parallelism(self.spark)
        if self.rate is None:
            return max(1, min(self.settings.commit_every, 8 * cores))
        by_time = int(self.rate * self.settings.commit_seconds * 0.8)
        return max(1, min(self.settings.commit_every, by_time))

    def score_all(self, todo: DataFrame, level: int, *, vanished: int = 0) -> None:
        """Commits `todo` in chunks of whole bursts; at `level` 1 and 2 (photos an earlier run
        died on) in sixteenths of a chunk and one photo at a time."""
        # Numbered in one partition: a unit is a short string, a survey 10^6 of them at most.
        numbered = (
            todo.select("unit")
            .distinct()
            .withColumn("_unit", F.row_number().over(Window.orderBy("unit")) - 1)
        )
        work = todo.join(numbered, "unit").cache()
        try:
            photos, count = (work.count(), numbered.count())
            if not count:
                return
            per_unit = photos / count
            first = 0
            while first < count:
                if self.stop:
                    self.stop.check()
                n = self._chunk_photos()
                n = {0: n, 1: max(1, n // 16), 2: 1}[min(level, 2)]
                last = min(count, first + max(1, round(n / per_unit)))
                chunk = work.filter((F.col("_unit") >= first) & (F.col("_unit") < last))
                self.commit(chunk, level, vanished=vanished)
                first = last
        finally:
            work.unpersist()

    def commit(
        self, chunk: DataFrame, level: int, *, vanished: int = 0, retried: bool = False
    ) -> None:
        paths = [r.path for r in chunk.select("path").collect()]
        if not paths:
            return
        self.folder.set_inflight(paths, level, vanished=vanished)
        started = time.perf_counter()
        number = self.folder.next_commit()
        staged = self.folder.staged(f"commit-{number:08d}")
        parallelism = max(1, min(len(paths), 2 * default_parallelism(self.spark)))
        scored = self.work.score(chunk.repartition(parallelism))
        try:
            scored.withColumn("commit", F.lit(number)).repartition(1).write.parquet(str(staged))
        except Exception as e:  # noqa: BLE001 - a cancelled job or a task that killed its JVM
            if self.stop:
                self.stop.check()
            if _disk_full(e):
                raise
            if not jvm_alive(self.spark):
                self.folder.mark_died()
                raise JobError(
                    f"the Spark JVM died while scoring {len(paths)} photos ({_first_line(e)}); "
                    "run the same command to continue: those photos are scored in smaller parts "
                    "first, and one that kills the process alone becomes a failure row"
                ) from None
            self.folder.drop_staged(staged)
            if level >= 2 or len(paths) == 1:
                if not retried:
                    self.log(
                        f"[{self.work.command}] scoring {paths[0]} failed ({_first_line(e)}); "
                        "trying it once more"
                    )
                    self.commit(chunk, level, vanished=vanished, retried=True)
                    return
                self.record_failed(chunk, f"scoring failed: {_first_line(e)}")
                self.folder.clear_inflight()
                return
            self.log(
                f"[{self.work.command}] a commit of {len(paths)} photos failed; scoring it in parts"
            )
            self.folder.clear_inflight()
            self.score_all(chunk.drop("_unit"), level + 1)
            return
        self.folder.commit(staged, number)
        self.folder.clear_inflight()
        seconds = time.perf_counter() - started
        self.scored += len(paths)
        rate = len(paths) / max(seconds, 1e-6)
        self.rate = rate if self.rate is None else 0.5 * (self.rate + rate)

    def record_failed(self, chunk: DataFrame, reason: str) -> None:
        """Commits `chunk`'s photos as failures with `reason`."""
        number = self.folder.next_commit()
        staged = self.folder.staged(f"commit-{number:08d}")
        table = self.spark.createDataFrame([], self.work.schema).schema
        given = {"path", "length", "modificationTime", "burst"}
        rows = chunk.select(
            *[
                F.col(f.name)
                if f.name in given
                else F.lit(
                    reason if f.name == "failure" else number if f.name == "commit" else None
                )
                .cast(f.dataType)
                .alias(f.name)
                for f in table.fields
            ]
        )
        rows.repartition(1).write.parquet(str(staged))
        self.folder.commit(staged, number)
        self.scored += rows.count()

    def record_crashed(self, chunk: DataFrame) -> None:
        """Photos the process died of, scored alone: listed as failures and skipped."""
        self.record_failed(
            chunk,
            "the process died while scoring this file alone in an earlier run; it was skipped "
            "(run again with --retry-failures to try it once more)",
        )
        self.folder.clear_inflight()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


TOP_K_TYPE = "array<struct<label:string,probability:double>>"

#: The committed table of a whole-photo classify run.
SCHEMA = (
    "path string, length long, modificationTime timestamp, predicted_label string, "
    f"confidence double, top_k {TOP_K_TYPE}, image_label string, burst string, "
    "failure string, commit int"
)


def score(
    photos: DataFrame, model: PipelineModel, levels: list[str], decoder: Any, ensemble: bool
) -> DataFrame:
    """The prediction rows of listed photos (path, length, modificationTime, burst, ...); with
    `ensemble`, the probabilities of each burst's photos are averaged."""
    scored = classified(model, read_files(photos, decoder))
    failure = F.coalesce("error", "featurizeError")
    if ensemble:
        # A photo that failed is a burst of its own, so it cannot spoil its neighbours' mean.
        scored = scored.withColumn(
            "unit", F.when(failure.isNull(), F.col("unit")).otherwise(F.col("path"))
        )
        scored = EnsembleByKey(
            keys=["unit"],
            cols=["probability"],
            colNames=["burst_probability"],
            collapseGroup=False,
        ).transform(scored)
    else:
        scored = scored.withColumn("burst_probability", F.col("probability"))
    top_k = F.expr(_top_k_sql("final", levels))

    def unless_failed(column: Any) -> Any:
        # A photo that could not be read has no features; its scores mean nothing.
        return F.when(failure.isNull(), column)

    return (
        scored.withColumn("levels", F.array(*[F.lit(v) for v in levels]))
        .withColumn(
            "final",
            F.when(
                F.col("burst_probability").isNotNull(), vector_to_array(F.col("burst_probability"))
            ),
        )
        .select(
            "path",
            "length",
            "modificationTime",
            unless_failed(
                F.expr("element_at(levels, CAST(array_position(final, array_max(final)) AS INT))")
            ).alias("predicted_label"),
            unless_failed(F.array_max("final")).cast("double").alias("confidence"),
            unless_failed(top_k).cast(TOP_K_TYPE).alias("top_k"),
            unless_failed(F.col("prediction")).alias("image_label"),
            "burst",
            failure.alias("failure"),
        )
    )


#: The committed table keeps at most this many photos' rows per file when a run ends.
ROWS_PER_FILE = 100_000


def finish(
    spark: SparkSession,
    folder: RunFolder,
    listing: DataFrame,
    outputs: Callable[[SparkSession, DataFrame, RunFolder], None],
    log: Log,
    schema: str = SCHEMA,
    *,
    prune: bool = False,
) -> dict[str, Any]:
    """Rewrites the committed table as one current row per photo (few large files), then
    rebuilds the CSV and results.json from it (`outputs`; an empty table of `schema` when nothing
    was committed), each written atomically. Photos no longer in `listing` keep their rows and
    are counted as missing; with `prune` their rows are dropped."""
    table = committed(spark, folder)
    photos = removed = missing = 0
    if table is not None:
        old = folder.parts()
        latest = current(table)
        listed = latest.join(listing.select("path"), "path", "left_semi")
        # A hidden name's "skipped" row that is no longer listed (--include-hidden now lists
        # what is under it) was never a result: it goes whatever the flags.
        skipped = F.coalesce(F.col("failure"), F.lit("")).startswith(HIDDEN_SKIPPED)
        unlisted = latest.join(listing.select("path"), "path", "left_anti")
        kept = listed.unionByName(unlisted.filter(~skipped))
        total, in_listing = kept.count(), listed.count()
        missing = total - in_listing
        present = listed if prune else kept
        removed = missing if prune else 0
        missing -= removed
        photos = total - removed
        if len(old) > max(1, -(-photos // ROWS_PER_FILE)) or removed or photos < table.count():
            number = folder.next_commit()
            staged = folder.staged(f"compact-{number:08d}")
            files = max(1, -(-photos // ROWS_PER_FILE))
            present.repartitionByRange(files, "path").sortWithinPartitions("path").write.parquet(
                str(staged)
            )
            # The new files hold the same rows (commit numbers kept) as the old ones, so a reader
            # between the renames and the deletes sees a photo's current row twice, never zero.
            folder.commit(staged, number)
            folder.drop_parts(old)
    rows = committed(spark, folder) or spark.createDataFrame([], schema)
    failures = rows.filter("failure IS NOT NULL").count()
    outputs(spark, rows, folder)
    return {"photos": photos, "failures": failures, "removed": removed, "missing": missing}


def write_outputs(
    spark: SparkSession, rows: DataFrame, folder: RunFolder, levels: list[str], root: str
) -> None:
    """predictions.csv and the MegaDetector-format results.json, rendered by Spark from the
    table (sorted by path) and moved into place with a rename: the driver only streams text
    through, so its memory does not grow with the survey."""
    ordered = _relative_files(rows, root)
    _write_predictions(folder, ordered)
    _write_json(
        folder,
        ordered.select(megadetector_entry(levels)),
        {
            "detection_categories": {"1": "animal"},
            "classification_categories": _categories(levels, 0),
            "info": {
                "format_version": FORMAT_VERSION,
                "classifier": f"mmlspark {mmlspark.__version__} camera-trap, whole-image",
                "classification_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            },
        },
    )
    folder.clean_staging()


_FOUR = "format_string('%.4f', {})"


def _write_predictions(folder: RunFolder, ordered: DataFrame) -> None:
    """predictions.csv: per photo the class, its confidence, the top classes and the failure."""
    table = ordered.select(
        F.col("file").alias("path"),
        F.coalesce("predicted_label", F.lit("")).alias("predicted_label"),
        F.when(F.col("confidence").isNull(), "")
        .otherwise(F.expr(_FOUR.format("confidence")))
        .alias("confidence"),
        # A JSON list, so that labels holding ':' or ';' read back unchanged.
        F.expr(
            "coalesce(to_json(transform(top_k, t -> named_struct('label', t.label, "
            "'probability', round(t.probability, 4)))), '')"
        ).alias("top_k"),
        F.coalesce("failure", F.lit("")).alias("failure"),
    )
    _write_csv(folder, table, "predictions.csv")


def _sql_strings(values: list[str]) -> str:
    """`values` as a Spark SQL array literal."""
    return "array(" + ", ".join(json.dumps(v).replace("'", "\\'") for v in values) + ")"


def _top_k_sql(probabilities: str, levels: list[str]) -> str:
    """SQL of the `TOP_K` most probable of `levels` by the array expression `probabilities`, as
    (label, probability) structs, most probable first."""
    pairs = (
        f"transform({probabilities}, (p, j) -> named_struct('label', {_sql_strings(levels)}[j], "
        "'probability', p))"
    )
    return (
        f"slice(array_sort({pairs}, (a, b) -> CASE WHEN a.probability > b.probability THEN -1 "
        f"WHEN a.probability < b.probability THEN 1 ELSE 0 END), 1, {TOP_K})"
    )


def _classifications_sql(top_k: str, levels: list[str]) -> str:
    """SQL of MegaDetector's `classifications` JSON text, [["<index in levels>", p], ...], of the
    (label, probability) array expression `top_k`; the class 'empty' is left out."""
    return (
        f"concat('[', array_join(transform(filter({top_k}, t -> t.label != {json.dumps(EMPTY)}), "
        f"t -> concat('[\"', CAST(array_position({_sql_strings(levels)}, t.label) - 1 AS STRING), "
        "'\", ', CAST(round(t.probability, 4) AS STRING), ']')), ', '), ']')"
    )


def megadetector_entry(levels: list[str]) -> Any:
    """One image of a MegaDetector batch-output file as a JSON text column: a failure, or one
    whole-image detection carrying the classification (none when the photo is classified
    empty). Built by Spark: its `classifications` are [category, confidence] pairs of mixed
    types, which no Spark type holds, so the text is assembled around `to_json` pieces."""
    failed = F.col("failure").isNotNull() | F.col("predicted_label").isNull()
    failure = F.to_json(
        F.struct(
            F.col("file"),
            F.coalesce("failure", F.lit("not classified")).alias("failure"),
            F.lit(None).cast("string").alias("detections"),
        ),
        {"ignoreNullFields": "false"},
    )
    empty = json.dumps(EMPTY)
    animal = (
        f"1.0 - coalesce(try_element_at(filter(top_k, t -> t.label = {empty}), 1).probability, 0.0)"
        if EMPTY in levels
        else "confidence"
    )
    conf = f"CAST(round({animal}, 4) AS STRING)"
    classifications = _classifications_sql("top_k", levels)
    detections = (
        f'CASE WHEN predicted_label = {empty} THEN \'[]\' ELSE concat(\'[{{"category": "1", '
        f'"conf": \', {conf}, \', "bbox": [0.0, 0.0, 1.0, 1.0], "classifications": \', '
        f"{classifications}, '}}]') END"
    )
    file_only = "to_json(named_struct('file', file))"
    scored = F.expr(
        f"concat(substring({file_only}, 1, length({file_only}) - 1), "
        f"', \"max_detection_conf\": ', {conf}, ', \"detections\": ', {detections}, '}}')"
    )
    return F.when(failed, failure).otherwise(scored).alias("entry")


#: The committed table of a detect run: per photo MegaDetector's detections.
DETECT_SCHEMA = (
    "path string, length long, modificationTime timestamp, "
    "detections array<struct<category:string,label:string,conf:double,bbox:array<double>>>, "
    "max_detection_conf double, burst string, failure string, commit int"
)

#: The MegaDetector batch-output format version the results follow.
FORMAT_VERSION = "1.6"


@dataclass
class LoadedDetector:
    """A detector file ready to run: the stage (model bytes set, checked), the side photos are
    letterboxed to and the file's name."""

    stage: ObjectDetector
    size: int
    name: str
    path: str

    def decoder(self, scale: int = 1) -> ImageDecoder:
        """Decodes at the smallest JPEG scale that covers `scale` times the letterbox; for crops
        `CROP_DECODE_SCALE`, so that they keep twice the detail the detector saw while a 12-24 MP
        photo is never held whole (a 4000x3000 photo is held at 2000x1500 for a 640 detector)."""
        side = scale * self.size
        return ImageDecoder(minHeight=side, minWidth=side)

    def cropper(self, threshold: float) -> CropDetections:
        """Square crops of the animal detections at or over `threshold`, as MegaDetector's crop
        scripts cut them for species classifiers (every category when no class is 'animal'); a
        photo without any stays as one row."""
        names = self.stage.getClassNames()
        return CropDetections(
            confidenceThreshold=threshold,
            categories=[str(i + 1) for i, name in enumerate(names) if name == "animal"],
            square=True,
            keepUncropped=True,
        )


#: Crops are cut from photos decoded to cover this many times the detector's input side.
CROP_DECODE_SCALE = 2


def load_detector(
    spark: SparkSession,
    detector: str,
    *,
    threshold: float = 0.005,
    image_size: int | None = None,
    class_names: list[str] | None = None,
) -> LoadedDetector:
    """The detector in file `detector`, checked before any photo is read: a model that is no
    YOLO-format detector, or disagrees with `image_size` or `class_names`, is refused."""
    try:
        model_bytes = Path(detector).read_bytes()
    except OSError as e:
        raise JobError(f"cannot read the detector model {detector}: {e}") from None
    stage = ObjectDetector(inputCol="image", confidenceThreshold=threshold)
    if image_size:
        stage.setImageSize(image_size)
    if class_names:
        stage.setClassNames(class_names)
    stage.setModelPayload(model_bytes)
    try:
        stage.transform(spark.createDataFrame([], _READ_SCHEMA))  # checks, runs nothing
    except Exception as e:  # noqa: BLE001 - a model that is no YOLO detector, said once
        raise JobError(f"{detector} is not a detector this job can run: {_first_line(e)}") from None
    if not image_size:
        # The model's fixed input size, else the detector's default.
        shape = next(iter(stage.getModelInputs().values()))["shape"]
        image_size = shape[2] if len(shape) == 4 and shape[2] > 0 else 640
    return LoadedDetector(
        stage.setImageSize(image_size),
        image_size,
        Path(detector).name,
        str(Path(detector).resolve()),
    )


def detect(
    spark: SparkSession,
    images: str,
    detector: str,
    out: str,
    *,
    threshold: float = 0.005,
    image_size: int | None = None,
    class_names: list[str] | None = None,
    overwrite: bool = False,
    wait: bool = False,
    settings: ClassifySettings | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Runs a YOLO-format ONNX detector (MegaDetector v5 and the like) on the photos under
    `images` into `out`: results.json in the MegaDetector batch format, detections.csv (a row
    per detection, and one per photo without any) and the Parquet table. Commits as it goes; an
    interrupted run continues where it stopped, as classify does."""
    check_folders(images, Path(out))
    found = load_detector(
        spark, detector, threshold=threshold, image_size=image_size, class_names=class_names
    )
    run = {
        "images": _qualified(spark, images),
        "detector": found.path,
        "detector_sha256": content_hash(found.path),
        "threshold": threshold,
        "image_size": found.size,
    }
    work = _detect_work(found)
    return _locked_run(spark, work, out, run, overwrite, wait, None, 0.0, settings, log)


#: The columns read_files gives, for checking a stage before any photo is read.
_READ_SCHEMA = (
    "path string, image struct<origin:string,height:int,width:int,nChannels:int,mode:int,"
    "data:binary>, error string"
)


def _max_conf(detections: str) -> Any:
    """The highest confidence of a detections column, 0 when it has none."""
    return F.coalesce(F.array_max(F.transform(detections, lambda d: d["conf"])), F.lit(0.0))


def _detect_work(found: LoadedDetector) -> _Work:
    decoder = found.decoder()
    names = found.stage.getClassNames()

    def score(photos: DataFrame) -> DataFrame:
        rows = found.stage.transform(read_files(photos, decoder))
        failure = F.coalesce("error", "detectionError")
        return rows.select(
            "path",
            "length",
            "modificationTime",
            F.when(failure.isNull(), F.col("detections")).alias("detections"),
            F.when(failure.isNull(), _max_conf("detections")).alias("max_detection_conf"),
            "burst",
            failure.alias("failure"),
        )

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder) -> None:
        assert folder.manifest is not None
        write_detections(spark, rows, folder, names, folder.manifest["images"], found.name)

    return _Work("detect", DETECT_SCHEMA, score, outputs)


#: The committed table of a two-stage classify: per photo the class (a species, a detection's
#: label such as 'person', or 'empty') and the detections, each classified one with its top
#: species.
TWO_STAGE_SCHEMA = (
    "path string, length long, modificationTime timestamp, predicted_label string, "
    f"confidence double, top_k {TOP_K_TYPE}, image_label string, "
    "detections array<struct<category:string,label:string,conf:double,bbox:array<double>,"
    f"classifications:{TOP_K_TYPE}>>, max_detection_conf double, burst string, failure string, "
    "commit int"
)


def _two_stage_work(
    model: PipelineModel,
    levels: list[str],
    found: LoadedDetector,
    threshold: float,
    ensemble: bool,
    model_name: str,
) -> _Work:
    decoder = found.decoder(CROP_DECODE_SCALE)
    cropper = found.cropper(threshold)
    names = found.stage.getClassNames()

    def score(photos: DataFrame) -> DataFrame:
        crops = cropper.transform(found.stage.transform(read_files(photos, decoder)))
        return score_two_stage(classified(model, crops), levels, threshold, ensemble)

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder) -> None:
        assert folder.manifest is not None
        ordered = _relative_files(rows, folder.manifest["images"])
        _write_predictions(folder, ordered)
        _write_csv(folder, _detections_table(ordered, species=True), "detections.csv")
        _write_json(
            folder,
            ordered.select(_detection_entries(levels)),
            {
                "detection_categories": _categories(names, 1),
                "classification_categories": _categories(levels, 0),
                "info": {
                    **_detection_info(found.name),
                    "classifier": f"mmlspark {mmlspark.__version__} camera-trap, {model_name}, "
                    f"on crops of detections at or over {threshold}",
                    "classification_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
                },
            },
        )
        folder.clean_staging()

    return _Work("classify", TWO_STAGE_SCHEMA, score, outputs)


def score_two_stage(
    crops: DataFrame, levels: list[str], threshold: float, ensemble: bool
) -> DataFrame:
    """The rows of `TWO_STAGE_SCHEMA` (without `commit`) from the classified crop rows of a chunk
    of photos (CropDetections with keepUncropped, then the model): a photo's class is the species
    of its most confident classified detection; else the label of its most confident detection
    at or over `threshold` that was not cropped (e.g. person); else empty. With `ensemble`, the
    species probabilities of a burst's photos are averaged and every photo of a burst with an
    animal gets the burst's species; `image_label` keeps the photo's own class."""
    classified = F.when(
        F.col("detectionIndex").isNotNull() & F.col("features").isNotNull(),
        F.struct(
            F.col("detectionIndex").alias("index"),
            vector_to_array(F.col("probability")).alias("probs"),
        ),
    )
    crop_failure = F.when(
        F.col("detectionIndex").isNotNull(), F.coalesce("cropError", "featurizeError")
    )
    photos = crops.groupBy("path").agg(
        *[F.first(c).alias(c) for c in ("length", "modificationTime", "burst", "unit")],
        F.first("detections").alias("detections"),
        F.first(F.coalesce("error", "detectionError")).alias("photo_failure"),
        F.first(crop_failure, ignorenulls=True).alias("crop_failure"),
        F.collect_list(classified).alias("classified"),
    )
    failure = F.coalesce("photo_failure", "crop_failure")
    # The most confident classified detection (the first of equals).
    own = F.expr(
        "array_max(transform(classified, c -> named_struct('conf', detections[c.index].conf, "
        "'first', -c.index, 'probs', c.probs))).probs"
    )
    photos = photos.withColumn("failure", failure).withColumn(
        "own", F.when(F.col("failure").isNull(), own)
    )
    if ensemble:
        # A photo that failed is a burst of its own, so it cannot spoil its neighbours' mean.
        unit = F.when(F.col("failure").isNull(), F.col("unit")).otherwise(F.col("path"))
        photos = photos.withColumn(
            "_burst", F.collect_list("own").over(Window.partitionBy(unit))
        ).withColumn(
            "final",
            F.expr(
                "CASE WHEN size(_burst) > 0 THEN transform(_burst[0], (x, j) -> "
                "aggregate(_burst, 0D, (acc, q) -> acc + q[j]) / size(_burst)) END"
            ),
        )
    else:
        photos = photos.withColumn("final", F.col("own"))
    confident = f"filter(detections, d -> d.conf >= {float(threshold)!r})"
    other = (
        f"array_max(transform({confident}, d -> named_struct('conf', d.conf, 'label', d.label)))"
    )

    def label(probabilities: str) -> Any:
        return F.expr(
            f"CASE WHEN failure IS NOT NULL THEN NULL WHEN {probabilities} IS NOT NULL THEN "
            f"element_at({_sql_strings(levels)}, CAST(array_position({probabilities}, "
            f"array_max({probabilities})) AS INT)) WHEN size({confident}) > 0 THEN {other}.label "
            f"ELSE {json.dumps(EMPTY)} END"
        )

    crop_top_k = _top_k_sql("try_element_at(filter(classified, c -> c.index = i), 1).probs", levels)
    detections = F.expr(
        "transform(detections, (d, i) -> named_struct('category', d.category, 'label', d.label, "
        f"'conf', d.conf, 'bbox', d.bbox, 'classifications', {crop_top_k}))"
    )
    max_conf = _max_conf("detections")
    unless_failed = F.col("failure").isNull()
    return photos.select(
        "path",
        "length",
        "modificationTime",
        label("final").alias("predicted_label"),
        F.when(
            unless_failed,
            F.expr(
                f"CASE WHEN final IS NOT NULL THEN array_max(final) WHEN size({confident}) > 0 "
                f"THEN {other}.conf END"
            ),
        )
        .otherwise(None)
        .alias("_confidence"),
        F.when(unless_failed & F.col("final").isNotNull(), F.expr(_top_k_sql("final", levels)))
        .cast(TOP_K_TYPE)
        .alias("top_k"),
        label("own").alias("image_label"),
        F.when(unless_failed, detections).alias("detections"),
        F.when(unless_failed, max_conf).alias("max_detection_conf"),
        "burst",
        "failure",
    ).select(
        "path",
        "length",
        "modificationTime",
        "predicted_label",
        # An empty photo's confidence: that nothing the detector found is there.
        F.when(F.col("predicted_label") == EMPTY, 1.0 - F.col("max_detection_conf"))
        .otherwise(F.col("_confidence"))
        .cast("double")
        .alias("confidence"),
        "top_k",
        "image_label",
        "detections",
        "max_detection_conf",
        "burst",
        "failure",
    )


def _relative_files(rows: DataFrame, root: str) -> DataFrame:
    """`rows` with `file`, the path relative to `root`, sorted by path into one partition."""
    prefix = root + "/"
    relative = F.when(
        F.col("path").startswith(prefix), F.expr(f"substring(path, {len(prefix) + 1})")
    ).otherwise(F.col("path"))
    return rows.withColumn("file", relative).orderBy("path").coalesce(1)


def _write_csv(folder: RunFolder, table: DataFrame, name: str) -> None:
    """`table` (one partition) as the CSV output `name`, with a header, moved into place."""
    staged = folder.staged("csv")
    # Spark's CSV writer trims values by default: a folder named " Site A" must keep its space.
    table.write.options(
        header="true",
        escape='"',
        emptyValue="",
        ignoreLeadingWhiteSpace="false",
        ignoreTrailingWhiteSpace="false",
    ).csv(str(staged))
    folder.move_output(next(staged.glob("part-*")), name)


def _write_json(folder: RunFolder, entries: DataFrame, rest: dict[str, Any]) -> None:
    """results.json: the `entry` JSON texts as `images`, then `rest`, streamed through."""
    staged = folder.staged("json")
    entries.write.text(str(staged))
    part = next(staged.glob("part-*"))

    def text() -> Iterator[str]:
        yield '{"images": ['
        with part.open(encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                yield ("\n " if i == 0 else ",\n ") + line.rstrip("\n")
        yield "\n], " + json.dumps(rest, indent=1)[1:] + "\n"

    folder.write_output("results.json", text())


def _detection_entries(levels: list[str] | None) -> Any:
    """One image of a MegaDetector batch-output file per row, as JSON text: a failure with
    `detections: null`, or `max_detection_conf` and the detections (category, conf to 3
    decimals, bbox to 4; the label is left out, the categories name it), each with its
    `classifications` among `levels` when it has some."""
    failed = F.to_json(
        F.struct("file", "failure", F.lit(None).cast("string").alias("detections")),
        {"ignoreNullFields": "false"},
    )
    detection = (
        "to_json(named_struct('category', d.category, 'conf', round(d.conf, 3), "
        "'bbox', transform(d.bbox, v -> round(v, 4))))"
    )
    if levels is not None:
        classifications = _classifications_sql("d.classifications", levels)
        detection = (
            f"CASE WHEN d.classifications IS NULL THEN {detection} ELSE concat(substring("
            f"{detection}, 1, length({detection}) - 1), ', \"classifications\": ', "
            f"{classifications}, '}}') END"
        )
    head = "to_json(named_struct('file', file, 'max_detection_conf', round(max_detection_conf, 3)))"
    found = F.expr(
        f"concat(substring({head}, 1, length({head}) - 1), ', \"detections\": [', "
        f"array_join(transform(detections, d -> {detection}), ', '), ']}}')"
    )
    return F.when(F.col("failure").isNotNull(), failed).otherwise(found).alias("entry")


def _detections_table(ordered: DataFrame, species: bool) -> DataFrame:
    """detections.csv: a row per detection (one per photo without any), with the species and
    its probability of the detections that were classified when `species`."""
    detection = F.col("detection")
    columns = [
        ("conf", "detection.conf"),
        ("x_min", "detection.bbox[0]"),
        ("y_min", "detection.bbox[1]"),
        ("width", "detection.bbox[2]"),
        ("height", "detection.bbox[3]"),
    ]
    if species:
        columns.append(("species_probability", "detection.classifications[0].probability"))
    table = ordered.select("file", F.explode_outer("detections").alias("detection"), "failure")
    return table.select(
        F.col("file").alias("path"),
        F.coalesce(detection["category"], F.lit("")).alias("category"),
        F.coalesce(detection["label"], F.lit("")).alias("label"),
        *[
            F.when(detection.isNull(), "").otherwise(F.expr(_FOUR.format(value))).alias(name)
            for name, value in columns[:5]
        ],
        *(
            [
                F.coalesce(F.expr("detection.classifications[0].label"), F.lit("")).alias(
                    "species"
                ),
                F.when(F.expr("detection.classifications IS NULL"), "")
                .otherwise(F.expr(_FOUR.format(columns[5][1])))
                .alias(columns[5][0]),
            ]
            if species
            else []
        ),
        F.coalesce("failure", F.lit("")).alias("failure"),
    )


def _categories(names: list[str], first: int) -> dict[str, str]:
    """A results.json categories map: the names by their ids as strings, counted from `first`
    (1 for MegaDetector's detection categories, 0 for classification categories)."""
    return {str(first + i): name for i, name in enumerate(names)}


def _detection_info(detector_name: str) -> dict[str, Any]:
    """The `info` of a results.json written from a detector's output."""
    return {
        "format_version": FORMAT_VERSION,
        "detector": detector_name,
        "detection_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "detector_metadata": {"detector": f"mmlspark {mmlspark.__version__}"},
    }


def write_detections(
    spark: SparkSession,
    rows: DataFrame,
    folder: RunFolder,
    names: list[str],
    root: str,
    detector_name: str,
) -> None:
    """detections.csv and the MegaDetector-format results.json of a detect run."""
    ordered = _relative_files(rows, root)
    _write_csv(folder, _detections_table(ordered, species=False), "detections.csv")
    _write_json(
        folder,
        ordered.select(_detection_entries(None)),
        {
            "detection_categories": _categories(names, 1),
            "info": _detection_info(detector_name),
        },
    )
    folder.clean_staging()


def with_bursts(
    spark: SparkSession,
    scored: DataFrame,
    root: str,
    bursts: str,
    cct: CctLabels | None,
    gap: float,
) -> DataFrame:
    """Adds `burst`: the CCT sequence of each photo, or runs of photos in one folder taken at most
    `gap` seconds apart; a photo without one is a burst of its own. The time a photo was taken is
    its EXIF DateTimeOriginal, else the CCT file's `datetime`, else (only then) its file time,
    which copying a survey resets."""
    relative = F.expr(f"substring(path, {len(root) + 2})")
    if bursts == "cct":
        sequences = sorted((cct.sequences if cct else {}).items())
        table = spark.createDataFrame(sequences, "relative_path string, seq string")
        joined = scored.withColumn("relative_path", relative).join(table, "relative_path", "left")
        return joined.withColumn("burst", F.coalesce("seq", "path")).drop("relative_path", "seq")
    if bursts != "time":
        raise JobError(f"--bursts must be off, cct or time, not {bursts!r}")
    times = sorted((cct.times if cct else {}).items())
    table = spark.createDataFrame(times, "relative_path string, cct_seconds double")
    timed = (
        _taken_times(scored, "exif_seconds")
        .withColumn("relative_path", relative)
        .join(F.broadcast(table), "relative_path", "left")
        .withColumn(
            "taken",
            F.coalesce("exif_seconds", "cct_seconds", F.col("modificationTime").cast("double")),
        )
        .drop("relative_path", "cct_seconds", "exif_seconds")
    )
    folder = F.regexp_extract("path", r"^(.*)/[^/]+$", 1)
    order = Window.partitionBy("folder").orderBy("taken", "path")
    seconds = F.col("taken")
    starts = F.when(
        F.lag(seconds).over(order).isNull() | (seconds - F.lag(seconds).over(order) > gap), 1
    ).otherwise(0)
    return (
        timed.withColumn("folder", folder)
        .withColumn("starts", starts)
        .withColumn("burst", F.concat_ws("#", "folder", F.sum("starts").over(order).cast("string")))
        .drop("folder", "starts", "taken")
    )


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


def _taken_times(files: DataFrame, out_col: str) -> DataFrame:
    """`files` with each photo's EXIF time in seconds in `out_col`, read by the jar's readers or
    the Python workers."""
    if files_in_python(files.sparkSession):
        from mmlspark.opencv import _cv

        return _cv.taken_times(files, out_col)  # type: ignore[no-any-return]
    return _jvm.taken_times(files, out_col)


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


def demo(spark: SparkSession, out: str, log: Log = print) -> dict[str, Any]:
    """Train on three quarters of the embedded photos, classify and evaluate the rest."""
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
    detection = demo_detection(spark, out_dir, written, log)
    return {"accuracy": metrics["accuracy"], "seconds": seconds, **summary, **detection}


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
