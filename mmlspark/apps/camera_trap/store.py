"""The classify output folder, kept like a small database.

- It deletes only what it wrote: every file it writes is listed in ``run.json`` first, and
  ``--overwrite`` removes those files and nothing else.
- Results are committed incrementally: each commit is one Parquet file written in a staging
  folder and renamed into ``predictions.parquet/``, so a reader sees whole commits or nothing.
- One run at a time: a lock file holding the host and process id, with a stale-lock check.
- What was being scored when a run died is recorded (``inflight.json``), so that a file that
  kills the process is isolated and listed as a failure, not retried forever.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST = "run.json"
TABLE = "predictions.parquet"
STAGING = "_staging"
INFLIGHT = "inflight.json"
LOCK = ".lock"


class FolderError(Exception):
    """The output folder cannot be used as asked; the message says what is there."""


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Writes `text` (or its pieces) to `path` through a temporary file in the same folder and a
    rename, so that `path` holds the old content or the new, never a part."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            for piece in [text] if isinstance(text, str) else text:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputLock:
    """An exclusive lock on an output folder: a file created with O_EXCL that holds the host,
    the process id and the start time. A lock left by a dead process of this host is taken over;
    one held by a live process (or another host) makes the caller wait (`wait`) or fail."""

    def __init__(self, folder: Path, *, wait: bool = False, poll_seconds: float = 1.0) -> None:
        self.path = folder / LOCK
        self.wait = wait
        self.poll_seconds = poll_seconds
        self.held = False

    def _holder(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}

    def _stale(self, holder: dict[str, Any]) -> bool:
        if not holder:  # unreadable or half-written: stale once it is old
            try:
                return time.time() - self.path.stat().st_mtime > 60
            except FileNotFoundError:
                return True
        return holder.get("host") == socket.gethostname() and not _alive(int(holder["pid"]))

    def __enter__(self) -> OutputLock:
        me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue
                if self._stale(holder):
                    self.path.unlink(missing_ok=True)
                    continue
                if self.wait:
                    time.sleep(self.poll_seconds)
                    continue
                since = time.strftime(
                    "%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started", 0)))
                )
                raise FolderError(
                    f"{self.path.parent} is in use by another classify run (host "
                    f"{holder.get('host', '?')}, process {holder.get('pid', '?')}, since {since}); "
                    f"wait for it to finish (or pass --wait), or choose another --out. If that "
                    f"process no longer exists, delete {self.path}"
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(me))
            self.held = True
            return self

    def __exit__(self, *exc: object) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def inside(a: Path, b: Path) -> bool:
    """Whether folder `a` is `b` or lies inside it (after resolving links)."""
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents


class RunFolder:
    """The files of one classify output folder, and what ``run.json`` says about them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.table = folder / TABLE
        self.staging = folder / STAGING
        self.manifest_path = folder / MANIFEST
        self.manifest: dict[str, Any] | None = None
        if self.manifest_path.exists():
            try:
                self.manifest = json.loads(self.manifest_path.read_text())
            except ValueError as e:
                raise FolderError(
                    f"{self.manifest_path} is not a readable run manifest: {e}"
                ) from None

    # -- the manifest ------------------------------------------------------------------------

    @property
    def written(self) -> set[str]:
        return set(self.manifest.get("files", [])) if self.manifest else set()

    def _save(self) -> None:
        assert self.manifest is not None
        self.manifest["files"] = sorted(self.manifest.get("files", []))
        atomic_write(self.manifest_path, json.dumps(self.manifest, indent=1))

    def start(self, run: dict[str, Any]) -> None:
        """Writes the manifest of a new run (keeping the list of files already written)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.manifest = {**run, "files": sorted(self.written | {MANIFEST})}
        self._save()

    def record(self, *paths: Path) -> None:
        """Lists files in the manifest before they are written."""
        assert self.manifest is not None
        names = {str(p.relative_to(self.folder)) for p in paths}
        if not names <= self.written:
            self.manifest["files"] = sorted(self.written | names)
            self._save()

    def forget(self, paths: Iterable[Path]) -> None:
        assert self.manifest is not None
        names = {str(p.relative_to(self.folder)) for p in paths}
        self.manifest["files"] = sorted(self.written - names)
        self._save()

    def foreign_files(self, limit: int = 3) -> tuple[int, list[str]]:
        """How many entries of the folder this job did not write, and the first few names."""
        written = self.written
        found: list[str] = []
        count = 0
        for root, dirs, files in os.walk(self.folder):
            for name in files + [d for d in dirs if not os.listdir(os.path.join(root, d))]:
                relative = os.path.relpath(os.path.join(root, name), self.folder)
                # An empty staging folder is the job's own (earlier runs left it behind).
                if relative not in written and relative not in (LOCK, STAGING):
                    count += 1
                    if len(found) < limit:
                        found.append(relative)
        return count, found

    def remove_own_files(self) -> int:
        """Deletes the files the manifest lists (the lock aside) and then the folders this job
        makes if they are left empty; returns how many files went. Nothing else is touched."""
        removed = 0
        for name in sorted(self.written - {MANIFEST}):
            path = self.folder / name
            if path.is_file() or path.is_symlink():
                path.unlink()
                removed += 1
        self.clean_staging()
        for folder in (self.table, self.staging):
            try:
                folder.rmdir()
            except OSError:
                pass  # missing, or holds something this job did not write
        if self.manifest is not None:
            self.manifest["files"] = [MANIFEST]
            self._save()
        return removed

    # -- staging, commits, in-flight work ----------------------------------------------------

    def clean_staging(self) -> None:
        """Removes what a killed run left half-written in the staging folder (never read), and
        the folder itself, which `staged` makes again when needed."""
        if not self.staging.is_dir():
            return
        for root, dirs, files in os.walk(self.staging, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
        self.staging.rmdir()

    def staged(self, name: str) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        return self.staging / f"{name}-{uuid.uuid4().hex[:8]}"

    def parts(self) -> list[Path]:
        """The committed Parquet files, oldest commit first."""
        if not self.table.is_dir():
            return []
        return sorted(p for p in self.table.glob("part-*.parquet") if p.is_file())

    def next_commit(self) -> int:
        numbers = [int(p.name.split("-")[1]) for p in self.parts()]
        return max(numbers, default=0) + 1

    def commit(self, staged_dir: Path, number: int) -> list[Path]:
        """Moves the Parquet files Spark wrote into `staged_dir` into the table, each with one
        rename; returns the new files."""
        files = sorted(staged_dir.glob("part-*.parquet"))
        self.table.mkdir(parents=True, exist_ok=True)
        targets = [
            self.table / f"part-{number:08d}-{i:04d}-{uuid.uuid4().hex[:8]}.parquet"
            for i in range(len(files))
        ]
        self.record(*targets)
        for source, target in zip(files, targets, strict=True):
            os.rename(source, target)
        for leftover in staged_dir.iterdir():
            leftover.unlink()
        staged_dir.rmdir()
        return targets

    def drop_parts(self, parts: Iterable[Path]) -> None:
        parts = list(parts)
        for p in parts:
            p.unlink(missing_ok=True)
        self.forget(parts)

    @property
    def inflight_path(self) -> Path:
        return self.folder / INFLIGHT

    def set_inflight(self, paths: list[str], level: int) -> None:
        self.record(self.inflight_path)
        atomic_write(self.inflight_path, json.dumps({"level": level, "paths": paths}))

    def clear_inflight(self) -> None:
        self.inflight_path.unlink(missing_ok=True)

    def inflight(self) -> tuple[list[str], int]:
        """What a run that died was scoring: its photos and how finely they were split."""
        try:
            data = json.loads(self.inflight_path.read_text())
            return list(data["paths"]), int(data["level"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return [], 0

    def move_output(self, source: Path, name: str) -> Path:
        """Moves a finished file into place as `name`, with one rename."""
        target = self.folder / name
        self.record(target)
        os.replace(source, target)
        return target

    def write_output(self, name: str, chunks: Iterable[str]) -> Path:
        """Streams `chunks` into `name` through a temporary file and a rename."""
        target = self.folder / name
        self.record(target)
        atomic_write(target, chunks)
        return target
