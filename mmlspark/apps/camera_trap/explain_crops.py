"""`explain` for a model trained on detection crops (`train --detector`): the photos are detected
and their crops classified as `classify --detector` does them, each photo's class comes from its
deciding crop (`DECIDING_CROP`), and the classifier is explained on that crop, brought to the
model's size once: the explainer perturbs the crop, never the photo. The heatmap is the photo at
the decode the crops were cut from, with the crop's weights laid over the pixels the crop took and
the detection's box outlined.

The photos are read three times: all of them once to detect and classify (only each photo's
decision is kept, on the driver), then the chosen ones in rounds of `ROUND` photos, once to cut
the deciding crops again from the box found (the detector does not run again) and once to draw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
from pyspark.ml import PipelineModel
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.detector import CROP_DECODE_SCALE, LoadedDetector
from mmlspark.apps.camera_trap.outputs import _detection_sql
from mmlspark.apps.camera_trap.predictions import (
    DECIDING_CROP,
    best_position,
    classified,
    featurizer_size,
    photos_of_crops,
)
from mmlspark.apps.camera_trap.settings import JobError, Log
from mmlspark.image import list_files, read_files
from mmlspark.opencv import ImageTransformer

#: Photos explained a round: their model-size crops are cached, their explanations collected.
ROUND = 32
#: The colour of the detection's box (BGR yellow: neither the tint's red nor its blue).
BOX_COLOUR = (0, 255, 255)
_CHOSEN = (
    "path string, _class int, confidence double, _detection string, "
    "detections array<struct<category:string,label:string,conf:double,bbox:array<double>>>"
)


def crop_explanations(
    spark: SparkSession,
    root: str,
    model: PipelineModel,
    found: LoadedDetector,
    threshold: float,
    photos: int,
    explainer: Any,
    log: Log,
) -> tuple[Iterator[tuple[dict[str, Any], np.ndarray]], dict[str, Any]]:
    """The heatmaps of the `photos` photos under `root` (the qualified --images) whose deciding
    crop the model is least certain of (every photo with one when 0), as (fields, picture) pairs
    that `explain._write` writes, made as they are consumed; and the summary's counts. Photos
    with no classified crop (no animal detection at or over `threshold`) get no heatmap."""
    listing = list_files(spark, root)
    decoder = found.decoder(CROP_DECODE_SCALE)
    decided = _decisions(read_files(listing, decoder), model, found, threshold).cache()
    try:
        counts = decided.agg(
            F.count("*").alias("photos"),
            F.count(F.when(F.col("failed"), 1)).alias("failed"),
            F.count(F.when(~F.col("failed") & F.col("_class").isNull(), 1)).alias("none"),
        ).first()
        assert counts is not None
        ranked = decided.filter(F.col("_class").isNotNull()).orderBy("confidence", "path")
        chosen = (ranked.limit(photos) if photos else ranked).drop("failed").collect()
    finally:
        decided.unpersist()
    log(
        f"[explain] {counts['photos']} photos detected with {found.name}: {counts['none']} without "
        f"an animal detection at or over {threshold} (no heatmap), {counts['failed']} could not "
        "be read or classified"
    )
    if photos:
        log(f"[explain] the {len(chosen)} photos the model is least certain of")
    summary = {
        "detector": found.path,
        "threshold": threshold,
        "without_detection": counts["none"],
        "failed": counts["failed"],
    }
    rounds = (chosen[i : i + ROUND] for i in range(0, len(chosen), ROUND))
    pictures = (
        picture
        for part in rounds
        for picture in _explained_round(listing, decoder, model, found, threshold, part, explainer)
    )
    return pictures, summary


def _decisions(
    read: DataFrame, model: PipelineModel, found: LoadedDetector, threshold: float
) -> DataFrame:
    """Per photo, as classify --detector decides it (without bursts): `failed`, and for a photo
    with a classified crop its class index `_class`, `confidence`, the deciding detection (a
    struct in `detections`, alone, and as results.json writes it in `_detection`)."""
    crops = classified(model, found.cropper(threshold).transform(found.stage.transform(read)))
    photos = photos_of_crops(crops).withColumn(
        "_d", F.when(F.col("failure").isNull(), F.expr(DECIDING_CROP))
    )
    detection = F.expr("detections[_d.index]")
    return photos.select(
        "path",
        F.col("failure").isNotNull().alias("failed"),
        F.expr(f"{best_position('_d.probs')} - 1").alias("_class"),
        F.array_max("_d.probs").cast("double").alias("confidence"),
        F.expr(f"transform(array(detections[_d.index]), d -> {_detection_sql(None)})[0]").alias(
            "_detection"
        ),
        F.when(F.col("_d").isNotNull(), F.array(detection)).alias("detections"),
    )


def _explained_round(
    listing: DataFrame,
    decoder: Any,
    model: PipelineModel,
    found: LoadedDetector,
    threshold: float,
    chosen: list[Row],
    explainer: Any,
) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
    """The heatmaps of one round of chosen photos."""
    spark = listing.sparkSession
    paths = [r["path"] for r in chosen]
    height, width = featurizer_size(model)
    table = spark.createDataFrame([tuple(r) for r in chosen], _CHOSEN)
    # The deciding crop cut again, from the same decode and box, then brought to the model's
    # size once (the featurizer's resize of a crop of its size changes nothing).
    read = read_files(listing.filter(F.col("path").isin(paths)), decoder)
    cropped = found.cropper(threshold).transform(read.join(F.broadcast(table), "path"))
    sized = ImageTransformer(inputCol="crop", outputCol="_sized", reducedDecode=False)
    crops = sized.resize(height, width).transform(cropped.filter(F.col("crop").isNotNull()))
    crops = crops.select(
        "path", "_class", F.col("_sized").alias("crop"), F.array("_class").alias("_targets")
    ).cache()
    try:
        out = explainer.transform(crops)
        columns = ["path", "_weights", "_superpixels", *(["_r2"] if "_r2" in out.columns else [])]
        explained = {r["path"]: r for r in out.select(*columns).collect()}
    finally:
        crops.unpersist()
    by_path = {r["path"]: r for r in chosen}
    photos = read_files(listing.filter(F.col("path").isin(list(explained))), decoder)
    for photo in photos.select("path", "image").toLocalIterator():
        row, decision = explained[photo["path"]], by_path[photo["path"]]
        if row["_weights"] is None or photo["image"] is None:
            continue
        box = decision["detections"][0]["bbox"]
        picture = crop_heatmap(photo["image"], box, row["_superpixels"], row["_weights"][0])
        fields = {
            "path": photo["path"],
            "class": decision["_class"],
            "confidence": decision["confidence"],
            "r2": row["_r2"][0] if "_r2" in columns and row["_r2"] is not None else None,
            "detection": json.loads(decision["_detection"]),
        }
        yield fields, picture


def crop_heatmap(photo: Any, bbox: list[float], superpixels: Any, weights: Any) -> np.ndarray:
    """The photo (an image struct) with the weights of the superpixels of its crop at `bbox`
    (square, as `LoadedDetector.cropper` cuts it) laid over the pixels the crop took, and the box
    outlined."""
    import cv2  # opencv-python: mmlspark[cpu] or [gpu]

    from mmlspark.detection import CropDetections
    from mmlspark.explainers import heatmap

    image_h, image_w = int(photo["height"]), int(photo["width"])
    try:
        r = CropDetections.region(image_h, image_w, bbox, True)
    except ValueError as e:
        raise JobError(f"{photo['origin']}: {e}") from None
    # Where a photo pixel lies in the image the superpixels were computed on: in the crop (its
    # pixels moved by the crop's corner and padding), then through the explainer's own mapping.
    source_h = superpixels["sourceHeight"] or superpixels["height"]
    source_w = superpixels["sourceWidth"] or superpixels["width"]
    ax, bx, ay, by = superpixels["transform"] or (1.0, 0.0, 1.0, 0.0)
    sx, sy = ax * source_w / r.crop_width, ay * source_h / r.crop_height
    located = {
        "height": superpixels["height"],
        "width": superpixels["width"],
        "labels": superpixels["labels"],
        "sourceHeight": image_h,
        "sourceWidth": image_w,
        "transform": [sx, sx * (r.left - r.x) + bx, sy, sy * (r.top - r.y) + by],
    }
    picture = heatmap(photo, located, weights)
    x0, y0 = round(bbox[0] * image_w), round(bbox[1] * image_h)
    x1, y1 = round((bbox[0] + bbox[2]) * image_w) - 1, round((bbox[1] + bbox[3]) * image_h) - 1
    thickness = max(1, round(max(image_h, image_w) / 400))
    cv2.rectangle(picture, (x0, y0), (max(x0, x1), max(y0, y1)), BOX_COLOUR, thickness)
    return picture
