"""The camera-trap classification job: train, classify, evaluate, and the demo that runs all three.

Training reads photos labelled by sub-folder or by a COCO Camera Traps (CCT) JSON, and fits
``ImageFeaturizer`` (an ONNX model cut at a feature node) followed by a logistic regression
(``TrainClassifier``); the fitted pipeline, model bytes included, is saved as one directory.
Classifying scores photos and writes predictions as Parquet and CSV plus a MegaDetector-format
results JSON; it resumes an interrupted run. Evaluating compares predictions with ground truth.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.functions import vector_to_array
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

import mmlspark
from mmlspark.image import ImageDecoder, ImageFeaturizer
from mmlspark.stages import EnsembleByKey
from mmlspark.train import ComputeModelStatistics, TrainClassifier, TrainedClassifierModel

TOP_K = 3
EMPTY = "empty"
Log = Callable[[str], None]


class JobError(Exception):
    """A problem with the job's inputs, found before any Spark work."""


def spark_session(master: str | None) -> SparkSession:
    """Local Spark unless told otherwise; under spark-submit, the session it configured."""
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:  # launched by spark-submit
        return SparkSession.builder.getOrCreate()
    return mmlspark.session(master or "local[*]", app_name="mmlspark-camera-trap")


def _qualified(spark: SparkSession, path: str) -> str:
    """The path as Spark reports file paths (`file:/...` for local ones), without a trailing /."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return str(fs.makeQualified(hadoop_path).toString()).rstrip("/")


def list_photos(spark: SparkSession, images: str) -> DataFrame:
    """Every file under `images`: path, modificationTime, content (read lazily)."""
    return (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(images)
        .select("path", "modificationTime", "content")
    )


def decode(photos: DataFrame) -> DataFrame:
    return (
        ImageDecoder(inputCol="content", outputCol="image", errorCol="error", originCol="path")
        .transform(photos)
        .drop("content")
    )


@dataclass
class CctLabels:
    """Ground truth from a COCO Camera Traps JSON: file name -> category, and its sequences."""

    labels: dict[str, str]
    sequences: dict[str, str]
    corrupt: set[str]

    @staticmethod
    def read(path: str) -> CctLabels:
        try:
            data = json.loads(Path(path).read_text())
            categories = {c["id"]: c["name"] for c in data["categories"]}
            names = {i["id"]: i["file_name"] for i in data["images"]}
            labels: dict[str, str] = {}
            for a in data.get("annotations", []):
                labels.setdefault(names[a["image_id"]], categories[a["category_id"]])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise JobError(f"cannot read COCO Camera Traps labels from {path}: {e!r}") from None
        sequences = {i["file_name"]: str(i["seq_id"]) for i in data["images"] if "seq_id" in i}
        corrupt = {i["file_name"] for i in data["images"] if i.get("corrupt")}
        return CctLabels(labels, sequences, corrupt)


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
    return df.join(truth, "relative_path", "left")


def train(
    spark: SparkSession,
    images: str,
    featurizer: str,
    model_out: str,
    *,
    labels: str | None = None,
    feature_node: str | None = "pool",
    image_size: int = 96,
    log: Log = print,
) -> tuple[PipelineModel, dict[str, Any]]:
    """Fits and saves the pipeline; returns it and counts (photos, failures, seconds)."""
    try:
        model_bytes = Path(featurizer).read_bytes()
    except OSError as e:
        raise JobError(f"cannot read the featurizer model {featurizer}: {e}") from None
    start = time.perf_counter()
    photos = with_labels(spark, decode(list_photos(spark, images)), images, labels).cache()
    usable = photos.filter("image IS NOT NULL AND label IS NOT NULL AND label != ''")
    counts = photos.agg(
        F.count("*").alias("all"),
        F.count("image").alias("decoded"),
        F.sum(F.expr("CAST(image IS NOT NULL AND label IS NOT NULL AND label != '' AS INT)")).alias(
            "usable"
        ),
    ).first()
    assert counts is not None
    log(
        f"[train] {counts['all']} files, {counts['all'] - counts['decoded']} not decodable, "
        f"{counts['usable']} labelled photos"
    )
    if not counts["usable"]:
        raise JobError(f"no labelled photos under {images}")
    featurize = ImageFeaturizer(
        inputCol="image",
        outputCol="features",
        imageHeight=image_size,
        imageWidth=image_size,
        errorCol="featurizeError",
    ).setModelPayload(model_bytes)
    if feature_node:
        featurize.setFeatureTensorName(feature_node)
    classifier = TrainClassifier(
        model=LogisticRegression(maxIter=200, regParam=0.01),
        labelCol="label",
        inputCols=["features"],
    )
    model = Pipeline(stages=[featurize, classifier]).fit(usable.select("path", "image", "label"))
    model.write().overwrite().save(model_out)
    seconds = time.perf_counter() - start
    log(
        f"[train] classes {_levels(model)}; fitted in {seconds:.1f} s "
        f"({counts['usable'] / seconds:.1f} photos/s); model saved to {model_out}"
    )
    photos.unpersist()
    summary = {
        "photos": counts["usable"],
        "failures": counts["all"] - counts["decoded"],
        "seconds": round(seconds, 2),
    }
    return model, summary


def _levels(model: PipelineModel) -> list[str]:
    """The classes of a trained pipeline (its last stage is a TrainedClassifierModel)."""
    last = model.stages[-1]
    if not isinstance(last, TrainedClassifierModel):
        raise JobError(
            f"the model's last stage is a {type(last).__name__}, not a trained classifier"
        )
    return list(last.getLevels())


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
    log: Log = print,
) -> dict[str, Any]:
    """Scores the photos under `images`. With `bursts` 'cct' (sequences from the `cct` JSON's
    seq_id) or 'time' (photos of one folder taken at most `burst_gap` seconds apart, by file time)
    the probabilities of a burst's photos are averaged and the burst's class is every photo's
    prediction; `image_label` keeps each photo's own."""
    if bursts == "cct" and cct is None:
        raise JobError("--bursts cct needs --cct, the COCO Camera Traps JSON with seq_id")
    sequences = CctLabels.read(cct).sequences if cct else {}
    try:
        model = PipelineModel.load(model_dir)
        levels = _levels(model)
    except Exception as e:  # noqa: BLE001 - any failure to load is reported the same way
        raise JobError(f"cannot load a camera-trap model from {model_dir}: {e}") from None
    out_dir = Path(out)
    manifest = {
        "images": _qualified(spark, images),
        "model": str(Path(model_dir).resolve()),
        "bursts": bursts if bursts != "time" else f"time:{burst_gap}",
    }
    predictions = out_dir / "predictions.parquet"
    if overwrite and out_dir.exists():
        shutil.rmtree(out_dir)
    if (out_dir / "run.json").exists():
        previous = json.loads((out_dir / "run.json").read_text())
        if previous != manifest:
            raise JobError(
                f"{out} holds results of another run ({previous}); pass --overwrite to replace them"
            )
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise JobError(f"{out} exists and is not a classify output; pass --overwrite to replace it")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "run.json").write_text(json.dumps(manifest))

    start = time.perf_counter()
    photos = list_photos(spark, images)
    scored_before = 0
    if predictions.exists():
        done = spark.read.parquet(str(predictions)).select("path", "modificationTime")
        scored_before = done.count()
        photos = photos.join(done, ["path", "modificationTime"], "left_anti")
    scored = model.transform(decode(photos))
    failure = F.coalesce("error", "featurizeError")
    if bursts != "off":
        scored = with_bursts(spark, scored, manifest["images"], bursts, sequences, burst_gap)
        # A photo that failed is a burst of its own, so it cannot spoil its neighbours' mean.
        scored = scored.withColumn(
            "burst", F.when(failure.isNull(), F.col("burst")).otherwise(F.col("path"))
        )
        scored = EnsembleByKey(
            keys=["burst"],
            cols=["probability"],
            colNames=["burst_probability"],
            collapseGroup=False,
        ).transform(scored)
    else:
        scored = scored.withColumn("burst", F.lit(None).cast("string")).withColumn(
            "burst_probability", F.col("probability")
        )
    top_k = F.expr(
        "slice(transform(array_sort(arrays_zip(final, levels), (a, b) -> "
        "CASE WHEN a.final > b.final THEN -1 WHEN a.final < b.final THEN 1 ELSE 0 END), "
        f"x -> named_struct('label', x.levels, 'probability', x.final)), 1, {TOP_K})"
    )

    def unless_failed(column: Any) -> Any:
        # A photo that could not be read has no features; its scores mean nothing.
        return F.when(failure.isNull(), column)

    result = (
        scored.withColumn("levels", F.array(*[F.lit(v) for v in levels]))
        .withColumn("final", vector_to_array(F.col("burst_probability")))
        .select(
            "path",
            "modificationTime",
            unless_failed(
                F.expr("element_at(levels, CAST(array_position(final, array_max(final)) AS INT))")
            ).alias("predicted_label"),
            unless_failed(F.array_max("final")).alias("confidence"),
            unless_failed(top_k).alias("top_k"),
            unless_failed(F.col("prediction")).alias("image_label"),
            "burst",
            failure.alias("failure"),
        )
    )
    result.write.mode("append").parquet(str(predictions))
    everything = spark.read.parquet(str(predictions)).cache()
    seconds = time.perf_counter() - start
    summary = write_outputs(everything, out_dir, levels, manifest["images"])
    summary["seconds"] = round(seconds, 2)
    new = summary["photos"] - scored_before
    log(
        f"[classify] {summary['photos']} photos ({summary['failures']} failures) in {out}; "
        f"this run {new} photos in {seconds:.1f} s ({new / max(seconds, 1e-9):.1f} photos/s)"
    )
    everything.unpersist()
    return summary


def with_bursts(
    spark: SparkSession,
    scored: DataFrame,
    root: str,
    bursts: str,
    sequences: dict[str, str],
    gap: float,
) -> DataFrame:
    """Adds `burst`: the CCT sequence of each photo, or runs of photos in one folder taken at most
    `gap` seconds apart; a photo without one is a burst of its own."""
    if bursts == "cct":
        table = spark.createDataFrame(sorted(sequences.items()), "relative_path string, seq string")
        relative = F.expr(f"substring(path, {len(root) + 2})")
        joined = scored.withColumn("relative_path", relative).join(table, "relative_path", "left")
        return joined.withColumn("burst", F.coalesce("seq", "path")).drop("relative_path", "seq")
    if bursts != "time":
        raise JobError(f"--bursts must be off, cct or time, not {bursts!r}")
    folder = F.regexp_extract("path", r"^(.*)/[^/]+$", 1)
    order = Window.partitionBy("folder").orderBy("modificationTime", "path")
    seconds = F.col("modificationTime").cast("double")
    starts = F.when(
        F.lag(seconds).over(order).isNull() | (seconds - F.lag(seconds).over(order) > gap), 1
    ).otherwise(0)
    return (
        scored.withColumn("folder", folder)
        .withColumn("starts", starts)
        .withColumn("burst", F.concat_ws("#", "folder", F.sum("starts").over(order).cast("string")))
        .drop("folder", "starts")
    )


def write_outputs(
    predictions: DataFrame, out_dir: Path, levels: list[str], root: str
) -> dict[str, Any]:
    """CSV and MegaDetector-format JSON from the full predictions table."""
    rows = predictions.orderBy("path").collect()
    prefix = root + "/"
    csv = ["path,predicted_label,confidence,top_k,failure"]
    images = []
    for r in rows:
        relative = r.path[len(prefix) :] if r.path.startswith(prefix) else r.path
        top = ";".join(f"{t.label}:{t.probability:.4f}" for t in (r.top_k or []))
        failure = (r.failure or "").replace('"', "'")
        confidence = "" if r.confidence is None else f"{r.confidence:.4f}"
        csv.append(f'"{relative}",{r.predicted_label or ""},{confidence},{top},"{failure}"')
        images.append(megadetector_entry(relative, r, levels))
    (out_dir / "predictions.csv").write_text("\n".join(csv) + "\n")
    results = {
        "images": images,
        "detection_categories": {"1": "animal"},
        "classification_categories": {str(i): name for i, name in enumerate(levels)},
        "info": {
            "format_version": "1.4",
            "classifier": f"mmlspark {mmlspark.__version__} camera-trap, whole-image",
            "classification_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    failures = sum(1 for r in rows if r.failure)
    return {"photos": len(rows), "failures": failures}


def megadetector_entry(relative: str, row: Any, levels: list[str]) -> dict[str, Any]:
    """One image of a MegaDetector batch-output file: a failure, or one whole-image detection
    carrying the classification (no detection when the photo is classified empty)."""
    if row.failure or row.predicted_label is None:
        return {"file": relative, "failure": row.failure or "not classified"}
    probabilities = {t.label: t.probability for t in row.top_k}
    animal = 1.0 - probabilities.get(EMPTY, 0.0) if EMPTY in levels else row.confidence
    classifications = [
        [str(levels.index(t.label)), round(t.probability, 4)] for t in row.top_k if t.label != EMPTY
    ]
    detections = []
    if row.predicted_label != EMPTY:
        detections.append(
            {
                "category": "1",
                "conf": round(animal, 4),
                "bbox": [0.0, 0.0, 1.0, 1.0],
                "classifications": classifications,
            }
        )
    return {"file": relative, "max_detection_conf": round(animal, 4), "detections": detections}


def evaluate(
    spark: SparkSession,
    predictions: str,
    out: str,
    *,
    labels: str | None = None,
    log: Log = print,
) -> dict[str, Any]:
    run = json.loads((Path(predictions) / "run.json").read_text())
    scored = spark.read.parquet(str(Path(predictions) / "predictions.parquet"))
    if labels is None:
        truth = scored.withColumn("label", F.regexp_extract("path", r"/([^/]+)/[^/]+$", 1))
    else:
        truth = with_labels(spark, scored, run["images"], labels)
    judged = truth.filter(
        "failure IS NULL AND label IS NOT NULL AND label != ''"
    ).withColumnRenamed("predicted_label", "prediction")
    stats = (
        ComputeModelStatistics(labelCol="label", predictionCol="prediction")
        .transform(judged)
        .first()
    )
    assert stats is not None
    metrics = {
        "photos": judged.count(),
        "failures": scored.filter("failure IS NOT NULL").count(),
        "bursts": run.get("bursts", "off"),
        "accuracy": stats.accuracy,
        "labels": stats.labels,
        "precision_per_class": dict(zip(stats.labels, stats.precision_per_class, strict=True)),
        "recall_per_class": dict(zip(stats.labels, stats.recall_per_class, strict=True)),
        "confusion_matrix": stats.confusion_matrix,
    }
    if metrics["bursts"] != "off":
        # The effect of burst ensembling: the same photos judged by their own predictions.
        per_photo = ComputeModelStatistics(labelCol="label", predictionCol="image_label")
        own = per_photo.transform(judged).first()
        assert own is not None
        metrics["accuracy_per_photo"] = own.accuracy
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "metrics.json").write_text(json.dumps(metrics, indent=1))
    draw_plots(spark, judged, metrics, Path(out))
    log(f"[evaluate] {metrics['photos']} photos: accuracy {metrics['accuracy']:.3f}")
    if "accuracy_per_photo" in metrics:
        log(
            f"[evaluate] burst ensembling ({metrics['bursts']}): accuracy "
            f"{metrics['accuracy_per_photo']:.3f} per photo -> {metrics['accuracy']:.3f} per burst"
        )
    for name in stats.labels:
        log(
            f"[evaluate]   {name:>10}: precision {metrics['precision_per_class'][name]:.3f}, "
            f"recall {metrics['recall_per_class'][name]:.3f}"
        )
    return metrics


def draw_plots(spark: SparkSession, judged: DataFrame, metrics: dict[str, Any], out: Path) -> None:
    """`confusion_matrix.png`, and `samples.png`: up to 16 photos, mistakes first, captioned
    "predicted (true ...)"; drawn by the library's OpenCV, so no plotting package is needed."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    charts = jvm.mmlspark.opencv.Charts
    matrix = {"labels": metrics["labels"], "matrix": metrics["confusion_matrix"]}
    charts.confusionMatrix(json.dumps(matrix), str(out / "confusion_matrix.png"))
    wrong = judged.filter("prediction != label").orderBy("path").limit(16).collect()
    right = judged.filter("prediction = label").orderBy("path").limit(16 - len(wrong)).collect()
    samples = [
        {
            "path": r.path,
            "caption": r.prediction + ("" if r.prediction == r.label else f" (true {r.label})"),
        }
        for r in wrong + right
    ]
    if samples:
        charts.imageGrid(json.dumps(samples), 4, 128, str(out / "samples.png"))


DEMO_DATA = Path(__file__).resolve().parent / "demo_data"


def demo(spark: SparkSession, out: str, log: Log = print) -> dict[str, Any]:
    """Train on three quarters of the embedded photos, classify and evaluate the rest."""
    out_dir = Path(out)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    for split in ("train", "test"):
        for photo in sorted((DEMO_DATA / "images").glob("*/*.jpg")):
            index = int(photo.stem.rsplit("_", 1)[1])
            if (index % 4 == 0) == (split == "test"):
                target = out_dir / "data" / split / photo.parent.name / photo.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(photo, target)
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
    summary = classify(
        spark,
        str(out_dir / "data" / "test"),
        str(out_dir / "model"),
        str(out_dir / "predictions"),
        log=log,
    )
    metrics = evaluate(spark, str(out_dir / "predictions"), str(out_dir / "evaluation"), log=log)
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
    return {"accuracy": metrics["accuracy"], "seconds": seconds, **summary}
