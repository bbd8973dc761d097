"""The `export --format camtrap-dp` command: a finished results folder of classify, detect or
the two-stage classify as a Camtrap DP 1.0 data package (datapackage.json, deployments.csv,
media.csv, observations.csv), for GBIF and the camera-trap tools that read the standard."""

from __future__ import annotations

import csv
import datetime
import json
import os
import re
import uuid
from pathlib import Path
from typing import IO, Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.bursts import taken_seconds, time_bursts
from mmlspark.apps.camera_trap.camtrap_dp import package as pkg
from mmlspark.apps.camera_trap.camtrap_dp.tables import (
    Classifiers,
    Clock,
    Photo,
    Settings,
    Taxon,
    csv_row,
    event_rows,
    iso,
    seen_in,
    short_id,
)
from mmlspark.apps.camera_trap.results import committed, current
from mmlspark.apps.camera_trap.settings import JobError, Log
from mmlspark.apps.camera_trap.store import (
    EXCLUSIVE_LOCK,
    LOCK,
    FolderError,
    OutputLock,
    RunFolder,
    atomic_write,
    inside,
)

#: The temporary names the package's files are written under before their rename.
_TEMPORARY = re.compile(r"\.(datapackage\.json|[a-z]+\.csv)\.[0-9a-f]{8}\.tmp")


def export(
    spark: SparkSession,
    predictions: str,
    out: str,
    *,
    package_format: str = "camtrap-dp",
    deployments: str | None = None,
    taxa: str | None = None,
    metadata: str | None = None,
    timezone: str = "UTC",
    capture_method: str = "activityDetection",
    threshold: float | None = None,
    event_gap: float = 3.0,
    files_public: bool = False,
    overwrite: bool = False,
    log: Log = print,
) -> dict[str, Any]:
    """Writes the results in `predictions` (a finished classify or detect --out) into `out` as a
    Camtrap DP package; returns its counts and what still keeps it from being valid (`missing`:
    coordinates without `deployments`, contributors and the sampling design without
    `metadata`). Failure rows (photos that could not be read) are left out. Photo times are the
    cameras' EXIF DateTimeOriginal in `timezone` (else the file's time, said in mediaComments);
    events are the run's bursts, or photos of a folder at most `event_gap` seconds apart.
    Detections count at or over `threshold` (default: the two-stage run's own, 0.2 for detect)."""
    if package_format != "camtrap-dp":
        raise JobError(f"--format must be camtrap-dp, not {package_format!r}")
    clock = Clock.parse(timezone)
    user_deployments = pkg.read_deployments(deployments) if deployments else None
    taxon_of = pkg.read_taxa(taxa)
    meta = pkg.read_metadata(metadata)
    results, target = Path(predictions), Path(out)
    try:
        folder = RunFolder(results)
    except FolderError as e:
        raise JobError(f"{predictions} is not a readable results folder of this job: {e}") from None
    if folder.manifest is None:
        raise JobError(
            f"{predictions} is not a results folder of this job (no run.json): give the --out "
            "folder of a classify or detect run"
        )
    _check_out(target, results, overwrite)
    try:
        held = OutputLock(results).__enter__()
    except FolderError as e:
        raise JobError(f"{e}; export a run once it has finished") from None
    except OSError:
        held = None  # a folder this user cannot write: no run of theirs can be using it either
    try:
        _check_finished(folder, predictions)
        with _out_lock(target):
            return _export(
                spark, folder, target, clock, user_deployments, taxon_of, meta,
                capture_method, threshold, event_gap, files_public, log,
            )  # fmt: skip
    finally:
        if held is not None:
            held.__exit__()


def _check_out(out: Path, results: Path, overwrite: bool) -> None:
    """Refuses an --out that is a file, overlaps the results, or holds anything: with
    `overwrite`, anything but an earlier export's own files (which are then replaced)."""
    if os.path.lexists(out) and not out.is_dir():
        raise JobError(f"--out {out} is not a folder; choose a folder for the package")
    if out.exists() and (inside(out, results) or inside(results, out)):
        raise JobError(f"--out {out} and --predictions {results} overlap; choose another --out")
    if not out.is_dir():
        return
    entries = [p for p in out.iterdir() if p.name not in (LOCK, EXCLUSIVE_LOCK)]
    if entries and not overwrite:
        raise JobError(
            f"{out} is not empty; choose a new or empty folder for --out, or pass --overwrite to "
            "replace an earlier export there"
        )
    foreign = sorted(
        p.name
        for p in entries
        if p.is_symlink()
        or not p.is_file()
        or (p.name not in pkg.PACKAGE_FILES and not _TEMPORARY.fullmatch(p.name))
    )
    if foreign:
        raise JobError(
            f"{out} holds files an export does not write ({len(foreign)}, e.g. "
            f"{', '.join(foreign[:3])}); --overwrite replaces only a package's own files"
        )


class _out_lock:
    """The lock of the package's folder (created if missing) while it is written."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.lock = OutputLock(out)

    def __enter__(self) -> None:
        try:
            self.lock.__enter__()
        except FolderError as e:
            raise JobError(str(e)) from None

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__()


def _check_finished(folder: RunFolder, predictions: str) -> None:
    """Refuses results whose last run did not finish: a run ends by writing results.json after
    its last commit, and clears its in-flight record."""
    output = folder.folder / "results.json"
    parts = folder.parts()
    unfinished = (
        not parts
        or "results.json" not in folder.written
        or not output.is_file()
        or folder.inflight_path.exists()
        or bool(folder.staged_folders)
        or max(p.stat().st_mtime_ns for p in parts) > output.stat().st_mtime_ns
    )
    if unfinished:
        raise JobError(
            f"{predictions} holds results of a run that has not finished (or holds no committed "
            "rows): run the same classify or detect command again to finish it, then export"
        )


def _kind(run: dict[str, Any]) -> str:
    if "model" in run:
        return "two-stage" if "detector" in run else "classify"
    if "detector" in run:
        return "detect"
    raise JobError(
        "its run.json names neither a model nor a detector: not a classify or detect run"
    )


def _classifiers(run: dict[str, Any]) -> Classifiers:
    """classifiedBy of the run's models: the file or folder name and the start of its digest."""

    def named(where: str, digest: str | None, uid: str | None) -> str:
        return f"{Path(where).name} ({f'sha256 {digest[:12]}' if digest else f'uid {uid}'})"

    detector = classifier = ""
    if "detector" in run:
        detector = named(run["detector"], run.get("detector_sha256"), None)
    if "model" in run:
        model = named(run["model"], run.get("model_sha256"), run.get("model_uid"))
        classifier = f"{model}, mmlspark camera-trap classifier"
    return Classifiers(detector, classifier)


#: The committed columns each kind of results is read from.
_COLUMNS = {
    "classify": ["predicted_label", "confidence"],
    "detect": ["detections", "max_detection_conf"],
    "two-stage": ["predicted_label", "detections", "max_detection_conf"],
}


def _photos(
    spark: SparkSession, folder: RunFolder, kind: str, gap: float, prefix: str
) -> tuple[DataFrame, int]:
    """The current rows of the photos that were read (and how many failed), with `exif` (the
    camera's time in seconds, as the job reads it), `mtime` (the file's, since the epoch),
    `burst` (the run's, else runs `gap` seconds apart), `folder` (the first folder under the
    survey) and `event_first` (the first time in the burst), in the order the package lists
    them. Only committed rows are read, through the results folder's table."""
    table = committed(spark, folder)
    assert table is not None  # _check_finished saw commits
    rows = current(table)
    failures = rows.filter("failure IS NOT NULL").count()
    read = rows.filter("failure IS NULL")
    photos = (
        read.filter("frame_number IS NULL")
        .select("path", "modificationTime", "burst", *_COLUMNS[kind])
        .unionByName(_videos(read.filter("frame_number IS NOT NULL"), kind))
    )
    timed = (
        taken_seconds(photos, "exif")
        .withColumn("mtime", F.col("modificationTime").cast("double"))
        .withColumn("taken", F.coalesce("exif", "mtime"))
    )
    assert folder.manifest is not None
    if folder.manifest.get("bursts", "off") == "off":
        timed = time_bursts(timed, gap)
    relative = F.expr(f"substring(path, {len(prefix) + 1})")
    first = F.when(F.instr(relative, "/") > 0, F.substring_index(relative, "/", 1)).otherwise("")
    timed = timed.withColumn("folder", first).withColumn(
        "event_first", F.min("taken").over(Window.partitionBy("burst"))
    )
    return timed.orderBy("event_first", "burst", "folder", "taken", "path"), failures


def _videos(frames: DataFrame, kind: str) -> DataFrame:
    """One row per video, as one medium, from its sampled frames' rows: classify, the label of
    its most confident frame; detect and both stages, per category the most confident detection
    of any frame (the run's video_results.json), and both stages' label that of the frame with
    the most confident detection. A video is not in a burst of the run's."""
    mtime = F.first("modificationTime").alias("modificationTime")
    burst = F.lit(None).cast("string").alias("burst")
    if kind == "classify":
        best = F.max_by(F.struct("predicted_label", "confidence"), "confidence").alias("best")
        return (
            frames.groupBy("path")
            .agg(mtime, best)
            .select("path", "modificationTime", burst, "best.predicted_label", "best.confidence")
        )
    found = frames.select("path", F.explode("detections").alias("d"))
    ranked = F.struct((-F.col("d.conf")).alias("rank"), F.col("d").alias("d"))
    per_category = (
        found.groupBy("path", "d.category")
        .agg(F.max_by(ranked, "d.conf").alias("best"))
        .groupBy("path")
        .agg(F.sort_array(F.collect_list("best")).alias("ranked"))
        .select("path", F.transform("ranked", lambda r: r["d"]).alias("detections"))
    )
    labels = (
        [F.max_by("predicted_label", F.coalesce("max_detection_conf", F.lit(0.0)))]
        if "predicted_label" in _COLUMNS[kind]
        else []
    )
    per_video = frames.groupBy("path").agg(
        mtime,
        *[c.alias("predicted_label") for c in labels],
        F.max("max_detection_conf").alias("max_detection_conf"),
    )
    empty = F.array().cast(frames.schema["detections"].dataType)
    return (
        per_video.join(per_category, "path", "left")
        .withColumn("detections", F.coalesce("detections", empty))
        .select("path", "modificationTime", burst, *_COLUMNS[kind])
    )


def _deployment_rows(
    folders: set[str], survey: str, given: dict[str, dict[str, str]] | None
) -> dict[str, dict[str, str]]:
    """The deployment row of each first folder of the photos ('' for photos directly in the
    survey folder): the user's, else one named after the folder with no coordinates."""
    rows = {}
    for name in sorted(folders):
        key = name or survey
        if given is None:
            rows[name] = {"deploymentID": key, "latitude": "", "longitude": "", "locationName": key}
        elif key in given:
            rows[name] = dict(given[key])
    unplaced = sorted((name or survey) for name in folders if name not in rows)
    if unplaced:
        raise JobError(
            f"the --deployments CSV names no deployment for the photos in {len(unplaced)} folders "
            f"(e.g. {unplaced[:3]}); add a row per folder (column folder, or a deploymentID "
            "equal to the folder's name; photos directly in the survey folder go to its name)"
        )
    return rows


class _StagedCsv:
    """A CSV written under a temporary name in the package folder, renamed into place later."""

    def __init__(self, folder: Path, name: str, header: list[str]) -> None:
        self.target = folder / name
        self.temporary = folder / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
        fd = os.open(self.temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        self.file: IO[str] = open(fd, "w", encoding="utf-8", newline="")
        self.writer = csv.writer(self.file, lineterminator="\n")
        self.header = header
        self.rows = 0
        self.writer.writerow(header)

    def write(self, values: dict[str, Any]) -> None:
        self.writer.writerow(csv_row(self.header, values))
        self.rows += 1

    def close(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def discard(self) -> None:
        if not self.file.closed:
            self.file.close()
        self.temporary.unlink(missing_ok=True)

    def commit(self) -> None:
        os.replace(self.temporary, self.target)


def _export(
    spark: SparkSession,
    folder: RunFolder,
    out: Path,
    clock: Clock,
    given: dict[str, dict[str, str]] | None,
    taxon_of: dict[str, Taxon],
    meta: dict[str, Any],
    capture_method: str,
    threshold: float | None,
    gap: float,
    files_public: bool,
    log: Log,
) -> dict[str, Any]:
    run = folder.manifest
    assert run is not None
    kind = _kind(run)
    if threshold is None:
        threshold = float(run["threshold"]) if kind == "two-stage" else 0.2
    root = str(run["images"]).rstrip("/")
    prefix, survey = root + "/", root.rsplit("/", 1)[-1]
    ordered, failures = _photos(spark, folder, kind, gap, prefix)
    ordered = ordered.persist()
    try:
        folders = {r.folder for r in ordered.select("folder").distinct().collect()}
        deployments = _deployment_rows(folders, survey, given)
        settings = Settings(
            capture_method,
            files_public,
            iso(_finished_at(folder)),
            taxon_of,
        )
        by = _classifiers(run)
        media = _StagedCsv(out, "media.csv", pkg.field_names("media"))
        observations = _StagedCsv(out, "observations.csv", pkg.field_names("observations"))
        try:
            spans, used = _write_rows(
                ordered, deployments, prefix, kind, threshold, by, clock, settings,
                media, observations,
            )  # fmt: skip
            media.close()
            observations.close()
        except BaseException:
            media.discard()
            observations.discard()
            raise
    finally:
        ordered.unpersist()
    table = []
    for name, row in sorted(deployments.items(), key=lambda item: item[1]["deploymentID"]):
        first, last = spans[name]
        table.append(
            {
                **row,
                "deploymentStart": row.get("deploymentStart") or iso(first),
                "deploymentEnd": row.get("deploymentEnd") or iso(last),
            }
        )
    descriptor = pkg.descriptor(
        meta,
        table,
        [taxon_of[label] for label in sorted(used)],
        survey=survey,
        capture_method=capture_method,
    )
    header = pkg.field_names("deployments")
    atomic_write(
        out / "deployments.csv",
        _csv_text([header, *(csv_row(header, row) for row in table)]),
    )
    media.commit()
    observations.commit()
    atomic_write(out / "datapackage.json", json.dumps(descriptor, indent=1, ensure_ascii=False))
    missing = pkg.missing(descriptor, table)
    log(
        f"[export] Camtrap DP {pkg.VERSION} package in {out}: {len(table)} deployments, "
        f"{media.rows} photos, {observations.rows} observations; {failures} failure rows (photos "
        "that could not be read) left out"
    )
    if missing:
        log("[export] not yet a valid Camtrap DP package; it lacks: " + "; ".join(missing))
    return {
        "deployments": len(table),
        "media": media.rows,
        "observations": observations.rows,
        "failures": failures,
        "missing": missing,
    }


def _finished_at(folder: RunFolder) -> datetime.datetime:
    """When the run's results were finished (its results.json written), in UTC."""
    seconds = (folder.folder / "results.json").stat().st_mtime
    return datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc)


def _csv_text(rows: list[list[str]]) -> list[str]:
    lines: list[str] = []

    class _Lines:
        def write(self, text: str) -> None:
            lines.append(text)

    writer = csv.writer(_Lines(), lineterminator="\n")
    for row in rows:
        writer.writerow(row)
    return lines


def _write_rows(
    ordered: DataFrame,
    deployments: dict[str, dict[str, str]],
    prefix: str,
    kind: str,
    threshold: float,
    by: Classifiers,
    clock: Clock,
    settings: Settings,
    media: _StagedCsv,
    observations: _StagedCsv,
) -> tuple[dict[str, list[datetime.datetime]], set[str]]:
    """Streams the ordered photo rows to the driver one partition at a time and writes each
    event's media and observation rows; returns each deployment's first and last photo time and
    the labels that got a scientific name."""
    spans: dict[str, list[datetime.datetime]] = {}
    used: set[str] = set()
    batch: list[Photo] = []
    key: tuple[str, str] | None = None

    def flush() -> None:
        if not batch:
            return
        assert key is not None
        media_rows, observation_rows = event_rows(settings, short_id(*key), batch)
        for row in media_rows:
            media.write(row)
        for row in observation_rows:
            observations.write(row)
        batch.clear()

    for row in ordered.toLocalIterator():
        if not row.path.startswith(prefix):
            raise JobError(f"a committed row's photo {row.path} is not under {prefix}")
        relative = row.path[len(prefix) :]
        deployment = deployments[row.folder]["deploymentID"]
        moment = clock.camera(row.exif) if row.exif is not None else clock.instant(row.mtime)
        seen = seen_in(row.asDict(recursive=True), kind, threshold, by)
        used.update(s.label for s in seen if s.kind != "blank" and s.label in settings.taxa)
        span = spans.setdefault(row.folder, [moment, moment])
        span[0], span[1] = min(span[0], moment), max(span[1], moment)
        if key != (deployment, row.burst):
            flush()
            key = (deployment, row.burst)
        batch.append(
            Photo(short_id(relative), deployment, relative, moment, row.exif is not None, seen)
        )
    flush()
    return spans, used
