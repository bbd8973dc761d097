"""The output files of a run, rendered by Spark from the committed table: predictions.csv,
detections.csv and the MegaDetector batch-format results.json."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap.predictions import _sql_strings
from mmlspark.apps.camera_trap.settings import EMPTY
from mmlspark.apps.camera_trap.store import RunFolder
from mmlspark.apps.camera_trap.video_results import ITEM, entries, summaries
from mmlspark.apps.camera_trap.videos import is_video


def write_outputs(
    spark: SparkSession,
    rows: DataFrame,
    folder: RunFolder,
    levels: list[str],
    root: str,
    *,
    ordered: bool = False,
    videos: bool | None = None,
) -> None:
    """predictions.csv and the MegaDetector-format results.json, rendered by Spark from the
    table (sorted by path) and moved into place with a rename: the driver only streams text
    through, so its memory does not grow with the survey. `ordered`: the rows are sorted by
    path and frame number already, their partitions in that order. `videos`: whether video
    files are among them (None: a job finds out)."""
    files = _relative_files(rows, root, ordered)
    _write_predictions(folder, files)
    items = _whole_image_items(levels)
    rest = {
        "detection_categories": {"1": "animal"},
        "classification_categories": _categories(levels, 0),
        "info": {
            "format_version": FORMAT_VERSION,
            "classifier": f"mmlspark {mmlspark.__version__} camera-trap, whole-image",
            "classification_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    }
    _write_json(folder, entries(files, megadetector_entry(levels), items, videos), rest)
    _write_video_summary(folder, files, items, rest, videos)
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
        *_frame_cells(),
    )
    _write_csv(folder, table, "predictions.csv")


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


#: The MegaDetector batch-output format version the results follow.
FORMAT_VERSION = "1.6"


def _relative_files(rows: DataFrame, root: str, ordered: bool = False) -> DataFrame:
    """`rows` with `file`, the path relative to `root`, sorted by path into one partition (sorted
    already when `ordered`: sorted by path and frame number, their partitions in that order)."""
    prefix = root + "/"
    relative = F.when(
        F.col("path").startswith(prefix), F.expr(f"substring(path, {len(prefix) + 1})")
    ).otherwise(F.col("path"))
    if not ordered:
        rows = rows.orderBy("path", "frame_number")
    return rows.withColumn("file", relative).coalesce(1)


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


def _frame_cells() -> list[Any]:
    """A video frame's number and time (seconds, to 3 decimals) as CSV cells; empty for photos."""
    return [
        F.coalesce(F.col("frame_number").cast("string"), F.lit("")).alias("frame_number"),
        F.coalesce(F.format_string("%.3f", "frame_time"), F.lit("")).alias("frame_time"),
    ]


def _whole_image_items(levels: list[str]) -> Any:
    """A classified frame's detections for a video's entry: the whole-image detection of
    `megadetector_entry` (none when the frame is classified empty)."""
    empty = json.dumps(EMPTY)
    animal = (
        f"1.0 - coalesce(try_element_at(filter(top_k, t -> t.label = {empty}), 1).probability, 0.0)"
        if EMPTY in levels
        else "confidence"
    )
    conf = f"round({animal}, 4)"
    text = (
        f'concat(\'{{"category": "1", "conf": \', CAST({conf} AS STRING), \', "bbox": '
        f'[0.0, 0.0, 1.0, 1.0], "classifications": \', {_classifications_sql("top_k", levels)}, '
        "'}')"
    )
    item = ITEM.format(category="'1'", conf=conf, json=text)
    return F.expr(f"filter(array({item}), x -> predicted_label != {empty})")


def _write_video_summary(
    folder: RunFolder,
    ordered: DataFrame,
    items: Any,
    rest: dict[str, Any],
    videos: bool | None = None,
) -> None:
    """video_results.json, the per-video summary (see `video_results`), when the run has
    videos (`videos`; None: a job finds out); an earlier one of this job goes when it has none."""
    if videos is None:
        videos = not ordered.filter(is_video("path")).isEmpty()
    if not videos:
        if "video_results.json" in folder.written:
            folder.drop_parts([folder.folder / "video_results.json"])
        return
    _write_json(folder, summaries(ordered, items), rest, "video_results.json")


def _write_json(
    folder: RunFolder, entries: DataFrame, rest: dict[str, Any], name: str = "results.json"
) -> None:
    """results.json: the `entry` JSON texts as `images`, then `rest`, streamed through."""
    staged = folder.staged("json")
    entries.select("entry").write.text(str(staged))
    part = next(staged.glob("part-*"))

    def text() -> Iterator[str]:
        yield '{"images": ['
        with part.open(encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                yield ("\n " if i == 0 else ",\n ") + line.rstrip("\n")
        yield "\n], " + json.dumps(rest, indent=1)[1:] + "\n"

    folder.write_output(name, text())


def _detection_sql(levels: list[str] | None) -> str:
    """SQL of one detection `d` as MegaDetector JSON text (see `_detection_entries`)."""
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
    return detection


def _detection_items(levels: list[str] | None) -> Any:
    """A frame's detections for a video's entry (see `video_results.entries`)."""
    item = ITEM.format(category="d.category", conf="round(d.conf, 3)", json=_detection_sql(levels))
    return F.expr(f"transform(detections, d -> {item})")


def _detection_entries(levels: list[str] | None) -> Any:
    """One image of a MegaDetector batch-output file per row, as JSON text: a failure with
    `detections: null`, or `max_detection_conf` and the detections (category, conf to 3
    decimals, bbox to 4; the label is left out, the categories name it), each with its
    `classifications` among `levels` when it has some."""
    failed = F.to_json(
        F.struct("file", "failure", F.lit(None).cast("string").alias("detections")),
        {"ignoreNullFields": "false"},
    )
    detection = _detection_sql(levels)
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
    table = ordered.select(
        "file",
        F.explode_outer("detections").alias("detection"),
        "failure",
        "frame_number",
        "frame_time",
    )
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
        *_frame_cells(),
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
    *,
    ordered: bool = False,
    videos: bool | None = None,
) -> None:
    """detections.csv and the MegaDetector-format results.json of a detect run (`ordered` and
    `videos` as `write_outputs` takes them)."""
    files = _relative_files(rows, root, ordered)
    _write_csv(folder, _detections_table(files, species=False), "detections.csv")
    rest = {"detection_categories": _categories(names, 1), "info": _detection_info(detector_name)}
    items = _detection_items(None)
    _write_json(folder, entries(files, _detection_entries(None), items, videos), rest)
    _write_video_summary(folder, files, items, rest, videos)
    folder.clean_staging()
