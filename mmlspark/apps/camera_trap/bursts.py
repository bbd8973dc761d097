"""Bursts: the photos a camera took in one trigger, from CCT sequences or from the times the
photos were taken."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap import _jvm
from mmlspark.apps.camera_trap.labels import CctLabels
from mmlspark.apps.camera_trap.settings import JobError
from mmlspark.core.backend import files_in_python


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
        taken_seconds(scored, "exif_seconds")
        .withColumn("relative_path", relative)
        .join(F.broadcast(table), "relative_path", "left")
        .withColumn(
            "taken",
            F.coalesce("exif_seconds", "cct_seconds", F.col("modificationTime").cast("double")),
        )
        .drop("relative_path", "cct_seconds", "exif_seconds")
    )
    return time_bursts(timed, gap).drop("taken")


def time_bursts(timed: DataFrame, gap: float) -> DataFrame:
    """`timed` (with `path` and `taken`, in seconds) with `burst`: runs of photos in one folder
    taken at most `gap` seconds apart, named `<folder>#<n>`."""
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
        .drop("folder", "starts")
    )


def taken_seconds(files: DataFrame, out_col: str) -> DataFrame:
    """`files` with each photo's EXIF time in seconds in `out_col`, read by the jar's readers or
    the Python workers."""
    if files_in_python(files.sparkSession):
        from mmlspark.image import taken_times

        return taken_times(files, out_col)
    return _jvm.taken_times(files, out_col)
