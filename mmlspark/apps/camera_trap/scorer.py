"""The scoring loop of a run: units of work (a burst, or a photo) scored and committed in chunks
sized to the measured rate, failures isolated down to one photo, and a prompt stop on SIGINT or
SIGTERM between commits."""

from __future__ import annotations

import errno
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.progress import Progress
from mmlspark.apps.camera_trap.session import _cancel_all
from mmlspark.apps.camera_trap.settings import ClassifySettings, JobError, Log, _first_line, _Work
from mmlspark.apps.camera_trap.store import RunFolder
from mmlspark.apps.camera_trap.videos import is_video_path
from mmlspark.core.jvm import jvm_alive
from mmlspark.core.session import default_parallelism


class Interrupted(Exception):
    """A signal asked the run to stop; what was committed stays."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopOnSignal:
    """Turns SIGINT and SIGTERM into a prompt, clean stop: the running Spark jobs are cancelled
    (their tasks end their ONNX Runtime runs) and the loop stops before the next commit."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            # From a thread of its own: a handler runs on the main thread, whose py4j connection
            # (one per thread) is waiting for the answer of the call the signal interrupted;
            # a second command on it would garble both.
            threading.Thread(target=_cancel_all, args=(self.spark,), daemon=True).start()

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():  # where Python allows handlers
            for s in (signal.SIGINT, signal.SIGTERM):
                self.previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def disk_full(e: BaseException) -> bool:
    """Whether `e` (from Python or from a Spark job) says a disk is full."""
    return (isinstance(e, OSError) and e.errno == errno.ENOSPC) or (
        "No space left on device" in str(e)
    )


@dataclass(frozen=True)
class Units:
    """The units of work of a run (bursts, or photos) ranked in name order, each with its rows:
    `count` units holding `rows` rows, in a cached table (`unpersist` drops it)."""

    table: DataFrame  # unit, _unit (its rank), _rows (its rows)
    count: int
    rows: int
    cached: DataFrame

    @property
    def ranked(self) -> DataFrame:
        """unit, _unit."""
        return self.table.select("unit", "_unit")

    def chunk(self, first: int, last: int) -> DataFrame:
        """The rows of the units ranked `first` to `last` (excluded), with their `_unit`."""
        ranks = (F.col("_unit") >= first) & (F.col("_unit") < last)
        rows = self.table.filter(ranks).select(F.explode("_rows").alias("_row"), "_unit")
        return rows.select("_row.*", "_unit")

    def unpersist(self) -> None:
        self.cached.unpersist()


def ranked_units(todo: DataFrame, partitions: int) -> Units:
    """The distinct units of `todo` with their rank in name order (`_unit`: 0, 1, ...) and their
    rows. Ranked without a window over one partition (a survey has up to 10^6 units): the units
    are range-partitioned and sorted within their partitions, and a unit's rank is the number of
    units in the partitions before its own plus its place in its own. The partitions' sizes,
    collected to place them, also count the units and their rows; and as each unit carries its
    rows (a listing's few columns), a commit takes them from the cached units, with no join."""
    units = (
        todo.groupBy("unit")
        .agg(F.collect_list(F.struct(*todo.columns)).alias("_rows"))
        .repartitionByRange(max(1, partitions), "unit")
        .sortWithinPartitions("unit")
        .withColumn("_part", F.spark_partition_id())
        # The partition's index in the upper bits, the row's place in it in the lower 33.
        .withColumn(
            "_place",
            F.monotonically_increasing_id() - F.shiftleft(F.col("_part").cast("long"), 33),
        )
        .cache()
    )
    counted = units.groupBy("_part").agg(
        F.count("*").alias("n"), F.sum(F.size("_rows")).alias("rows")
    )
    sizes = {r["_part"]: (r["n"], r["rows"]) for r in counted.collect()}
    offset, before, rows = F.lit(0).cast("long"), 0, 0
    for part in sorted(sizes):
        offset = F.when(F.col("_part") == part, F.lit(before)).otherwise(offset)
        before += sizes[part][0]
        rows += sizes[part][1]
    table = units.select("unit", (offset + F.col("_place")).alias("_unit"), "_rows")
    return Units(table, before, rows, units)


class Scorer:
    """Scores units of work (a burst, or a photo) in commits, sized to the measured rate."""

    def __init__(
        self,
        spark: SparkSession,
        folder: RunFolder,
        work: _Work,
        settings: ClassifySettings,
        log: Log,
    ) -> None:
        self.spark = spark
        self.folder = folder
        self.work = work
        self.settings = settings
        self.log = log
        self.scored = 0
        self.rate: float | None = None  # photos/s of the commits so far
        self.commits = 0  # scored by this run (the commits whose rates were measured)
        self.stop: StopOnSignal | None = None
        self.progress = Progress(work.command, log, settings.progress_json)

    def _chunk_photos(self) -> int:
        cores = default_parallelism(self.spark)
        if self.rate is None:
            return max(1, min(self.settings.commit_every, 8 * cores))
        by_time = int(self.rate * self.settings.commit_seconds * 0.8)
        return max(1, min(self.settings.commit_every, by_time))

    def score_all(
        self, todo: DataFrame, level: int, *, vanished: int = 0, planned: int | None = None
    ) -> None:
        """Commits `todo` in chunks of whole bursts; at `level` 1 and 2 (photos an earlier run
        died on) in sixteenths of a chunk and one photo at a time. `planned` (the photos committed
        by earlier runs) marks a call of the run itself, whose photos count in its progress."""
        units = ranked_units(todo, default_parallelism(self.spark))
        count, photos = units.count, units.rows
        try:
            if planned is not None and photos:
                self.progress.planned(photos, planned)
            if not count:
                return
            per_unit = photos / count
            first = 0
            while first < count:
                if self.stop:
                    self.stop.check()
                n = self._chunk_photos()
                n = {0: n, 1: max(1, n // 16), 2: 1}[min(level, 2)]
                last = min(count, first + max(1, round(n / per_unit)))
                self.commit(units.chunk(first, last), level, vanished=vanished)
                first = last
        finally:
            units.unpersist()

    def commit(
        self, chunk: DataFrame, level: int, *, vanished: int = 0, retried: bool = False
    ) -> None:
        paths = [r.path for r in chunk.select("path").collect()]
        if not paths:
            return
        self.folder.set_inflight(paths, level, vanished=vanished)
        started = time.perf_counter()
        number = self.folder.next_commit()
        staged = self.folder.staged(f"commit-{number:08d}")
        parallelism = max(1, min(len(paths), 2 * default_parallelism(self.spark)))
        videos = any(is_video_path(p) for p in paths)
        scored = self.work.score(chunk.repartition(parallelism), videos)
        try:
            scored.withColumn("commit", F.lit(number)).repartition(1).write.parquet(str(staged))
        except Exception as e:  # noqa: BLE001 - a cancelled job or a task that killed its JVM
            if self.stop:
                self.stop.check()
            if disk_full(e):
                raise
            if not jvm_alive(self.spark):
                self.folder.mark_died()
                raise JobError(
                    f"the Spark JVM died while scoring {len(paths)} photos ({_first_line(e)}); "
                    "run the same command to continue: those photos are scored in smaller parts "
                    "first, and one that kills the process alone becomes a failure row"
                ) from None
            self.folder.drop_staged(staged)
            if level >= 2 or len(paths) == 1:
                if not retried:
                    self.log(
                        f"[{self.work.command}] scoring {paths[0]} failed ({_first_line(e)}); "
                        "trying it once more"
                    )
                    self.commit(chunk, level, vanished=vanished, retried=True)
                    return
                self.record_failed(chunk, f"scoring failed: {_first_line(e)}")
                self.folder.clear_inflight()
                return
            self.log(
                f"[{self.work.command}] a commit of {len(paths)} photos failed; scoring it in parts"
            )
            self.folder.clear_inflight()
            self.score_all(chunk.drop("_unit"), level + 1)
            return
        self.folder.commit(staged, number)
        self.folder.clear_inflight()
        seconds = time.perf_counter() - started
        self.scored += len(paths)
        self.progress.committed(len(paths))
        self.measured(len(paths), seconds)

    def measured(self, photos: int, seconds: float) -> None:
        """Takes the rate of a commit of `photos` that took `seconds` into the rate that sizes the
        next commits. A run's first commit carries the run's one-time costs (the model's ONNX
        Runtime sessions, the JIT): the second commit's rate replaces its rate instead of being
        averaged with it, so that the commits reach their size (`commit_seconds`, at most
        `commit_every` photos) by the third, not after several small ones, each with its own plan
        and write."""
        rate = photos / max(seconds, 1e-6)
        self.commits += 1
        if self.rate is None or self.commits == 2:
            self.rate = rate
        else:
            self.rate = 0.5 * (self.rate + rate)

    def record_failed(self, chunk: DataFrame, reason: str) -> None:
        """Commits `chunk`'s photos as failures with `reason`."""
        number = self.folder.next_commit()
        staged = self.folder.staged(f"commit-{number:08d}")
        table = self.spark.createDataFrame([], self.work.schema).schema
        given = {"path", "length", "modificationTime", "burst"}
        rows = chunk.select(
            *[
                F.col(f.name)
                if f.name in given
                else F.lit(
                    reason if f.name == "failure" else number if f.name == "commit" else None
                )
                .cast(f.dataType)
                .alias(f.name)
                for f in table.fields
            ]
        )
        rows.repartition(1).write.parquet(str(staged))
        self.folder.commit(staged, number)
        failed = rows.count()
        self.scored += failed
        self.progress.committed(failed)

    def record_crashed(self, chunk: DataFrame) -> None:
        """Photos the process died of, scored alone: listed as failures and skipped."""
        self.record_failed(
            chunk,
            "the process died while scoring this file alone in an earlier run; it was skipped "
            "(run again with --retry-failures to try it once more)",
        )
        self.folder.clear_inflight()
