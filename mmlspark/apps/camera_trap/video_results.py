"""The MegaDetector batch-format entries of videos, built by Spark from their frames' rows.

As MegaDetector's ``process_video`` writes them (format 1.6), a video is one entry: ``file``,
``frame_rate``, ``frames_processed`` (the sampled frame numbers) and ``detections``, the
detections of all its frames, each with its ``frame_number``; a video that failed has
``frame_rate`` -1, no frames, its ``failure`` and null ``detections``. Ours also carry
``max_detection_conf`` (over all frames), as a photo's entry does. The per-video summary
(video_results.json) is what MegaDetector's ``frame_results_to_video_results`` makes of them by
default: per video and detection category, the most confident detection of any frame (the
earliest of equals), with its frame number."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.videos import is_video

#: A row's detections as JSON texts: array<struct<category, conf, json>> (see `entries`).
ITEM = "named_struct('category', {category}, 'conf', {conf}, 'json', {json})"


def _framed(frames: DataFrame, items: Column) -> DataFrame:
    """One row per video: its failure, frame rate, sorted frame numbers and every detection of
    its frames (frame order), each with `frame` and its JSON text carrying `frame_number`."""
    with_frame = F.expr(
        "transform(_items, x -> named_struct('category', x.category, 'conf', x.conf, 'frame', "
        "frame_number, 'json', concat(substring(x.json, 1, length(x.json) - 1), "
        "', \"frame_number\": ', CAST(frame_number AS STRING), '}')))"
    )
    rows = frames.withColumn("_items", F.when(F.col("failure").isNull(), items)).withColumn(
        "_items", with_frame
    )
    return rows.groupBy("path", "file").agg(
        F.first("failure", ignorenulls=True).alias("failure"),
        F.max("frame_rate").alias("frame_rate"),
        F.sort_array(F.collect_list("frame_number")).alias("frames"),
        F.flatten(
            F.transform(
                F.sort_array(F.collect_list(F.struct("frame_number", "_items"))),
                lambda s: F.coalesce(s["_items"], F.array().cast(with_frame_type())),
            )
        ).alias("dets"),
    )


def with_frame_type() -> str:
    return "array<struct<category:string,conf:double,frame:int,json:string>>"


def _entry(detections: str) -> Column:
    """A video's entry as JSON text, from `_framed`'s columns; `detections` is the SQL of the
    array of detections to write."""
    failed = F.to_json(
        F.struct(
            "file",
            F.lit(-1.0).alias("frame_rate"),
            F.array().cast("array<int>").alias("frames_processed"),
            "failure",
            F.lit(None).cast("string").alias("detections"),
        ),
        {"ignoreNullFields": "false"},
    )
    head = (
        "to_json(named_struct('file', file, 'frame_rate', frame_rate, 'frames_processed', frames, "
        "'max_detection_conf', round(coalesce(array_max(transform(dets, x -> x.conf)), 0D), 3)))"
    )
    found = F.expr(
        f"concat(substring({head}, 1, length({head}) - 1), ', \"detections\": [', "
        f"array_join(transform({detections}, x -> x.json), ', '), ']}}')"
    )
    return F.when(F.col("failure").isNotNull(), failed).otherwise(found).alias("entry")


def entries(
    ordered: DataFrame, photo_entry: Column, items: Column, videos: bool | None = None
) -> DataFrame:
    """(path, entry) per file, in path order in one partition: a photo's `photo_entry`; a
    video's entry from its frame rows, whose detections `items` gives per row. `ordered` is in
    path order in one partition; with `videos` False (no video files among its rows) its rows
    are the entries as they are, sorted already."""
    if videos is False:
        return ordered.select("path", photo_entry.alias("entry"))
    video = is_video("path")
    photos = ordered.filter(~video).select("path", photo_entry.alias("entry"))
    framed = _framed(ordered.filter(video), items).select("path", _entry("dets"))
    return photos.unionByName(framed).orderBy("path").coalesce(1)


def summaries(ordered: DataFrame, items: Column) -> DataFrame:
    """(path, entry) per video: its entry with, per detection category, the most confident
    detection of its frames (the earliest of equals)."""
    best = (
        "transform(array_sort(array_distinct(transform(dets, x -> x.category))), c -> "
        "array_max(transform(filter(dets, x -> x.category = c), x -> named_struct('conf', "
        "x.conf, 'first', -x.frame, 'json', x.json))))"
    )
    framed = _framed(ordered.filter(is_video("path")), items)
    return framed.select("path", _entry(best)).orderBy("path").coalesce(1)
