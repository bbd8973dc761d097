"""The camera-trap job's shared definitions: its constants, its error, the settings of a
resumable run, what a run computes (`_Work`) and the schemas of the tables it commits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from mmlspark.apps.camera_trap.store import RunFolder

TOP_K = 3
EMPTY = "empty"
Log = Callable[[str], None]


class JobError(Exception):
    """A problem with the job's inputs, found before any Spark work."""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


#: The columns of the class index the logistic regression learns and predicts.
LABEL_INDEX, PREDICTION_INDEX = "label_index", "prediction_index"


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
    #: A file that gets one JSON object per commit appended (see ``progress.Progress``).
    progress_json: str | None = None


@dataclass
class _Work:
    """What a resumable run computes per photo and renders at the end: `score` turns listed
    files (path, length, modificationTime, burst, unit; with True when video files are among
    them) into rows of `schema` without its `commit` column (a photo's row, a video's sampled
    frames' rows, or a file's one failure row), and `outputs` writes the result files from the
    committed table's current rows (sorted by path and frame number, their partitions in that
    order; with True when video files are among them)."""

    command: str
    schema: str
    score: Callable[[DataFrame, bool], DataFrame]
    outputs: Callable[[SparkSession, DataFrame, RunFolder, bool], None]


TOP_K_TYPE = "array<struct<label:string,probability:double>>"


#: Every committed table ends with a video frame's columns (null for photos and failures) before
#: `commit`: a video has a row per sampled frame, all from one commit.

#: The committed table of a whole-photo classify run.
SCHEMA = (
    "path string, length long, modificationTime timestamp, predicted_label string, "
    f"confidence double, top_k {TOP_K_TYPE}, image_label string, burst string, "
    "failure string, frame_number int, frame_time double, frame_rate double, commit int"
)


#: The committed table of a detect run: per photo MegaDetector's detections.
DETECT_SCHEMA = (
    "path string, length long, modificationTime timestamp, "
    "detections array<struct<category:string,label:string,conf:double,bbox:array<double>>>, "
    "max_detection_conf double, burst string, failure string, frame_number int, "
    "frame_time double, frame_rate double, commit int"
)


#: The committed table of a two-stage classify: per photo the class (a species, a detection's
#: label such as 'person', or 'empty') and the detections, each classified one with its top
#: species.
TWO_STAGE_SCHEMA = (
    "path string, length long, modificationTime timestamp, predicted_label string, "
    f"confidence double, top_k {TOP_K_TYPE}, image_label string, "
    "detections array<struct<category:string,label:string,conf:double,bbox:array<double>,"
    f"classifications:{TOP_K_TYPE}>>, max_detection_conf double, burst string, failure string, "
    "frame_number int, frame_time double, frame_rate double, commit int"
)
