"""A run's results folder: checked against the inputs, opened for the same run (resumed) or
another (refused unless overwritten), started, and its committed table read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.ml import PipelineModel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.listing import local_path
from mmlspark.apps.camera_trap.settings import JobError, Log
from mmlspark.apps.camera_trap.store import FolderError, RunFolder, content_hash, inside


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


def committed(
    spark: SparkSession, folder: RunFolder, schema: str | None = None
) -> DataFrame | None:
    """Every committed row (a file may have several: the latest commit is current). Parts
    written before videos were read lack the frame columns: they read as null. Given the table's
    `schema` (the run's, which every part was written with, less columns added since) the parts
    are read with it; otherwise Spark reads the parts' footers to merge their schemas, a job."""
    parts = folder.parts()
    if not parts:
        return None
    files = [str(p) for p in parts]
    if schema is not None:
        return spark.read.schema(schema).parquet(*files)
    table = spark.read.option("mergeSchema", "true").parquet(*files)
    for name, kind in (("frame_number", "int"), ("frame_time", "double"), ("frame_rate", "double")):
        if name not in table.columns:
            table = table.withColumn(name, F.lit(None).cast(kind))
    return table


def current(table: DataFrame, *, marked: bool = False) -> DataFrame:
    """The current rows: a photo's (or a failed video's) one row, a video's sampled frames, all
    from the file's latest commit. A row committed twice under one number (a compaction that
    stopped between its renames and its deletes) counts once. With `marked`, every row, marked
    instead: `_current`, and `_first`, true on one current row of each file."""
    by_file = Window.partitionBy("path")
    once = Window.partitionBy("path", "frame_number").orderBy(F.col("commit").desc())
    rows = table.withColumn(
        "_current",
        (F.col("commit") == F.max("commit").over(by_file)) & (F.row_number().over(once) == 1),
    )
    if not marked:
        return rows.filter("_current").drop("_current")
    # Every file has current rows (its newest commit's): one of them comes first in this order.
    first = by_file.orderBy(F.col("_current").desc(), F.col("frame_number").asc_nulls_first())
    return rows.withColumn("_first", F.row_number().over(first) == 1)
