"""The `train` command: fits ``ImageFeaturizer`` and a logistic regression over the sorted
class names, on whole photos or on the crops of a detector's detections, and saves the pipeline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark.ml import PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.feature import IndexToString
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap.detector import CROP_DECODE_SCALE, LoadedDetector, load_detector
from mmlspark.apps.camera_trap.labels import with_labels
from mmlspark.apps.camera_trap.predictions import _levels, _sql_strings
from mmlspark.apps.camera_trap.session import _qualified
from mmlspark.apps.camera_trap.settings import EMPTY, LABEL_INDEX, PREDICTION_INDEX, JobError, Log
from mmlspark.core.session import default_parallelism
from mmlspark.image import ImageDecoder, list_files, read_files
from mmlspark.onnx import ImageFeaturizer


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


def _for_fitting(rows: DataFrame) -> DataFrame:
    """`rows` cached in at most one partition per core: the regression runs one Spark job per
    iteration, whose cost on a small survey is its tasks, not its rows."""
    return rows.coalesce(default_parallelism(rows.sparkSession)).cache()


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
    # Featurized once: the classes' scan and the regression's passes read the cached features.
    rows = _for_fitting(featured.filter("features IS NOT NULL").select("features", "label"))
    try:
        fitted = _fit_classifier(rows)
    finally:
        rows.unpersist()
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
        usable = _for_fitting(rows.filter("wanted AND features IS NOT NULL"))
        try:
            fitted = _fit_classifier(usable)
        finally:
            usable.unpersist()
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
