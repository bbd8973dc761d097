"""The resumable run of classify and detect: lists the photos, scores those not yet
committed in commits sized to the measured rate, survives signals, crashes and full disks, and
ends with one current row per photo and the output files."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.bursts import with_bursts
from mmlspark.apps.camera_trap.labels import CctLabels
from mmlspark.apps.camera_trap.listing import HIDDEN_SKIPPED, hidden_entries
from mmlspark.apps.camera_trap.results import begin, committed, current, open_folder
from mmlspark.apps.camera_trap.scorer import Interrupted, Scorer, StopOnSignal, disk_full
from mmlspark.apps.camera_trap.settings import (
    SCHEMA,
    ClassifySettings,
    JobError,
    Log,
    _first_line,
    _Work,
)
from mmlspark.apps.camera_trap.store import FolderError, OutputLock, RunFolder
from mmlspark.apps.camera_trap.videos import is_video
from mmlspark.core.session import default_parallelism
from mmlspark.image import list_files


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
        try:
            open_folder(out_dir, run, overwrite)  # refuses a folder not ours before writing a lock
        except JobError:
            # A folder a run of this job holds now may show that run's files in flight (its
            # manifest, mid-rename): it is judged under the lock, below, where no run writes.
            if not OutputLock.held(out_dir):
                raise
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
        if not disk_full(e):
            raise
        if folder is not None:
            folder.clear_inflight()  # a full disk says nothing about the photos being scored
        raise JobError(
            f"cannot write to {out}: no space left on device. What was committed is kept: free "
            "some space and run the same command to continue"
        ) from None
    finally:
        lock.__exit__()


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
    table = committed(spark, folder, work.schema)
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
        # Only where results could be replaced: a new run's listing is read by its numbering.
        empty = (table is not None or overwrite) and listing.isEmpty()
    except JobError:
        raise
    except Exception as e:  # noqa: BLE001 - a path that is not there, or cannot be listed
        raise JobError(f"cannot list --images {run['images']}: {_first_line(e)}") from None
    if empty:
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
        before = (
            latest.join(listing.select("path"), "path", "left_semi").select("path").distinct()
        ).count()
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
    scorer = Scorer(spark, folder, work, settings, log)
    suspects, level, died, vanished = folder.inflight()
    try:
        with StopOnSignal(spark) as stop:
            scorer.stop = stop
            try:
                if suspects:
                    held = todo.filter(F.col("path").isin(suspects))
                    todo = todo.filter(~F.col("path").isin(suspects))
                    _rescore_suspects(
                        scorer, work.command, held, len(suspects), level, died, vanished, before
                    )
                scorer.score_all(todo, 0, planned=before)
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
    scorer: Scorer,
    command: str,
    held: DataFrame,
    count: int,
    level: int,
    died: bool,
    vanished: int,
    before: int,
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
        scorer.score_all(held, level, vanished=vanished + 1, planned=before)
    elif level >= 2:
        scorer.progress.planned(count, before)
        scorer.record_crashed(held)
    else:
        scorer.log(
            f"[{command}] an earlier run died while scoring {count} photos; scoring them in "
            "smaller parts first"
        )
        scorer.score_all(held, level + 1, planned=before)


#: The committed table keeps at most this many rows per file when a run ends.
ROWS_PER_FILE = 100_000


def _counts(marked: DataFrame, present: Any, kept: Any) -> Any:
    """In one pass over the committed table `marked` (every row, with `_current`, `_first` and
    `_listed`): its rows; the files (a video has a row per sampled frame), rows and failure rows
    that are `kept`, all of them and those still listed; and the video files among those
    `present` (those the outputs are written from)."""
    listed = F.col("_listed").isNotNull()
    failed = F.col("failure").isNotNull()
    first = F.col("_first")
    return marked.agg(
        F.count(F.lit(1)).alias("table_rows"),
        F.count(F.when(kept & first, 1)).alias("files"),
        F.count(F.when(kept & first & listed, 1)).alias("listed_files"),
        F.count(F.when(kept, 1)).alias("rows"),
        F.count(F.when(kept & listed, 1)).alias("listed_rows"),
        F.count(F.when(kept & failed, 1)).alias("failures"),
        F.count(F.when(kept & failed & listed, 1)).alias("listed_failures"),
        F.count(F.when(present & first & is_video("path"), 1)).alias("videos"),
    ).first()


def finish(
    spark: SparkSession,
    folder: RunFolder,
    listing: DataFrame,
    outputs: Callable[[SparkSession, DataFrame, RunFolder, bool], None],
    log: Log,
    schema: str = SCHEMA,
    *,
    prune: bool = False,
) -> dict[str, Any]:
    """Rewrites the committed table as one current row per photo (few large files), then
    rebuilds the CSV and results.json (`outputs`, given the rows sorted by path and whether
    videos are among them; an empty table of `schema` when nothing was committed), each written
    atomically. Photos no longer in `listing` keep their rows and are counted as missing; with
    `prune` their rows are dropped.

    The sorted current rows are computed once, cached, and both written as the new table and
    rendered as the outputs; the parts they replace are deleted only once the outputs are
    written, so that the rows stay readable from the files they come from until then."""
    table = committed(spark, folder, schema)
    if table is None:
        outputs(spark, spark.createDataFrame([], schema), folder, False)
        return {"photos": 0, "failures": 0, "removed": 0, "missing": 0}
    old = folder.parts()
    paths = listing.select("path").dropDuplicates(["path"]).withColumn("_listed", F.lit(1))
    # Partitioned by path into a partition a core, which the windows of `current` keep: Spark
    # does not coalesce the shuffles of a plan it caches (each would run
    # spark.sql.shuffle.partitions tasks, most of them empty).
    by_path = table.repartition(default_parallelism(spark), "path")
    marked = current(by_path, marked=True).join(paths, "path", "left").cache()
    # A hidden name's "skipped" row that is no longer listed (--include-hidden now lists what is
    # under it) was never a result: it goes whatever the flags.
    skipped = F.coalesce(F.col("failure"), F.lit("")).startswith(HIDDEN_SKIPPED)
    listed = F.col("_listed").isNotNull()
    kept = F.col("_current") & (listed | ~skipped)
    present = kept & listed if prune else kept
    try:
        counts = _counts(marked, present, kept)
        total, missing = counts["files"], counts["files"] - counts["listed_files"]
        current_rows = counts["listed_rows"] if prune else counts["rows"]
        failures = counts["listed_failures"] if prune else counts["failures"]
        removed = missing if prune else 0
        missing -= removed
        files = max(1, -(-current_rows // ROWS_PER_FILE))
        rows = (
            marked.filter(present)
            .select(*table.columns)
            .repartitionByRange(files, "path")
            .sortWithinPartitions("path", "frame_number")
            .cache()
        )
        try:
            compact = len(old) > files or removed or current_rows < counts["table_rows"]
            if compact:
                number = folder.next_commit()
                staged = folder.staged(f"compact-{number:08d}")
                rows.write.parquet(str(staged))
                # The new files hold the same rows (commit numbers kept) as the old ones, so a
                # reader between the renames and the deletes sees a photo's current row twice,
                # never zero.
                folder.commit(staged, number)
            outputs(spark, rows, folder, counts["videos"] > 0)
            if compact:
                folder.drop_parts(old)
        finally:
            rows.unpersist()
    finally:
        marked.unpersist()
    return {"photos": total - removed, "failures": failures, "removed": removed, "missing": missing}
