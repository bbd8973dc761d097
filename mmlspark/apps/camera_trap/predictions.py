"""What a trained pipeline says about photos: the rows a whole-photo classify run and a
two-stage (detector, then classifier on crops) run commit per photo, and the model's classes."""

from __future__ import annotations

import json
from typing import Any

from pyspark.ml import PipelineModel
from pyspark.ml.classification import LogisticRegressionModel
from pyspark.ml.feature import IndexToString
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.settings import EMPTY, PREDICTION_INDEX, TOP_K, TOP_K_TYPE, JobError
from mmlspark.onnx import ImageFeaturizer
from mmlspark.stages import EnsembleByKey
from mmlspark.train import TrainedClassifierModel

#: A frame's columns, as the scored rows carry them.
FRAMES = ("frame_number", "frame_time", "frame_rate")


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


def _featurizer(model: PipelineModel) -> ImageFeaturizer | None:
    """The model's featurizer stage, if it has one."""
    return next((s for s in model.stages if isinstance(s, ImageFeaturizer)), None)


def trained_on_crops(
    model: PipelineModel, model_dir: str, detector: str | None, command: str
) -> bool:
    """Whether `model` was trained on detection crops (`train --detector`: its featurizer reads
    the 'crop' column). `command` (classify, explain) refuses such a model without a `detector`,
    and a model trained on whole photos with one."""
    featurizer = _featurizer(model)
    on_crops = featurizer is not None and featurizer.getInputCol() == "crop"
    if on_crops and detector is None:
        raise JobError(
            f"the model in {model_dir} was trained on detection crops (train --detector); "
            f"{command} with it needs --detector, the same detector"
        )
    if detector is not None and not on_crops:
        raise JobError(
            f"the model in {model_dir} was trained on whole photos; {command} --detector needs "
            "a model trained on crops: train --detector"
        )
    return on_crops


def featurizer_size(model: PipelineModel) -> tuple[int, int]:
    """The image size the model's featurizer resizes to (0, 0 when it has none)."""
    stage = _featurizer(model)
    return (0, 0) if stage is None else (stage.getImageHeight(), stage.getImageWidth())


def score(read: DataFrame, model: PipelineModel, levels: list[str], ensemble: bool) -> DataFrame:
    """The prediction rows of decoded photos or video frames (path, length, modificationTime,
    burst, unit, the frame columns, image, error: `videos.read_units`); with `ensemble`, the
    probabilities of each burst's photos are averaged."""
    scored = classified(model, read)
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
            unless_failed(F.expr(f"element_at(levels, {best_position('final')})")).alias(
                "predicted_label"
            ),
            unless_failed(F.array_max("final")).cast("double").alias("confidence"),
            unless_failed(top_k).cast(TOP_K_TYPE).alias("top_k"),
            unless_failed(F.col("prediction")).alias("image_label"),
            "burst",
            failure.alias("failure"),
            *FRAMES,
        )
    )


def _sql_strings(values: list[str]) -> str:
    """`values` as a Spark SQL array literal."""
    return "array(" + ", ".join(json.dumps(v).replace("'", "\\'") for v in values) + ")"


def best_position(probabilities: str) -> str:
    """SQL of the position (from 1) of the most probable class in the array expression
    `probabilities` (the first of equals): a photo's class."""
    return f"CAST(array_position({probabilities}, array_max({probabilities})) AS INT)"


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


def _max_conf(detections: str) -> Any:
    """The highest confidence of a detections column, 0 when it has none."""
    return F.coalesce(F.array_max(F.transform(detections, lambda d: d["conf"])), F.lit(0.0))


def photos_of_crops(crops: DataFrame, carried: tuple[str, ...] = ()) -> DataFrame:
    """The classified crop rows of photos (CropDetections with keepUncropped, then the model)
    grouped back into one row per photo (per video frame where `crops` has `frame_number`):
    `path`, the first of the `carried` columns, `detections`, `failure` (the photo's read or
    detection error, else its first crop's that failed) and `classified`, the (index, probs) of
    the crops classified. A photo with a failure gets no class."""
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
    keys = ["path", "frame_number"] if "frame_number" in crops.columns else ["path"]
    photos = crops.groupBy(*keys).agg(
        *[F.first(c).alias(c) for c in carried],
        F.first("detections").alias("detections"),
        F.first(F.coalesce("error", "detectionError")).alias("photo_failure"),
        F.first(crop_failure, ignorenulls=True).alias("crop_failure"),
        F.collect_list(classified).alias("classified"),
    )
    return photos.withColumn("failure", F.coalesce("photo_failure", "crop_failure")).drop(
        "photo_failure", "crop_failure"
    )


#: SQL of the crop that decides a photo's class (of `photos_of_crops`' rows): the classified crop
#: of its most confident detection (the first of equals), as a struct of the detection's `conf`,
#: `first` (minus its index), `index` and the crop's `probs`; null when none was classified.
DECIDING_CROP = (
    "array_max(transform(classified, c -> named_struct('conf', detections[c.index].conf, "
    "'first', -c.index, 'index', c.index, 'probs', c.probs)))"
)


def score_two_stage(
    crops: DataFrame, levels: list[str], threshold: float, ensemble: bool
) -> DataFrame:
    """The rows of `TWO_STAGE_SCHEMA` (without `commit`) from the classified crop rows of a chunk
    of photos (CropDetections with keepUncropped, then the model): a photo's class is the species
    of its deciding crop (`DECIDING_CROP`: its most confident classified detection's); else the
    label of its most confident detection at or over `threshold` that was not cropped (e.g.
    person); else empty. With `ensemble`, the species probabilities of a burst's photos are
    averaged and every photo of a burst with an animal gets the burst's species; `image_label`
    keeps the photo's own class."""
    # A photo, or a video's frame: its crops' rows grouped back together.
    carried = ("length", "modificationTime", "burst", "unit", "frame_time", "frame_rate")
    photos = photos_of_crops(crops, carried)
    own = F.expr(f"{DECIDING_CROP}.probs")
    photos = photos.withColumn("own", F.when(F.col("failure").isNull(), own))
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
            f"element_at({_sql_strings(levels)}, {best_position(probabilities)}) "
            f"WHEN size({confident}) > 0 THEN {other}.label "
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
        *FRAMES,
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
        *FRAMES,
    )
