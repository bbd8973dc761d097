"""The results folder of the camera-trap job, kept like a small database with one owner.

- It deletes only what it can prove it wrote: ``run.json`` carries the job's format marker and a
  run id, and lists (before they are written) the relative names of the files and staging
  folders of the job's own layout. A manifest without the marker, or naming anything outside
  that layout (an absolute path, ``..``, another name), is foreign: nothing is deleted for it.
- Nothing in the folder is followed through a symbolic link: the job's folders must be real
  directories, and a delete removes the name itself, never what a link points to.
- Results are committed incrementally: each commit is one Parquet file written in a staging
  folder and renamed into ``predictions.parquet/``, so a reader sees whole commits or nothing.
- One run at a time: an OS lock (``flock``) on ``.lock``, held for the life of the process, so
  the kernel releases it when the holder dies, however it dies.
- What was being scored when a run died is recorded (``inflight.json``), so that a file that
  kills the process is isolated and listed as a failure, not retried forever; a death the run
  could not see (an outside SIGKILL, a power cut) is not held against the photos.
"""

from __future__ import annotations

import json
import os
import re
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mmlspark.apps.camera_trap.files import (
    FolderError,
    atomic_write,
    content_hash,
    real_directory,
    remove_name,
    remove_tree,
)
from mmlspark.apps.camera_trap.locking import EXCLUSIVE_LOCK, LOCK, OutputLock

__all__ = [
    "EXCLUSIVE_LOCK",
    "LOCK",
    "FolderError",
    "OutputLock",
    "RunFolder",
    "atomic_write",
    "content_hash",
    "inside",
    "read_manifest",
    "real_directory",
    "remove_name",
]

MANIFEST = "run.json"
TABLE = "predictions.parquet"
STAGING = "_staging"
INFLIGHT = "inflight.json"

#: The marker that makes a run.json this job's own.
FORMAT = "mmlspark camera-trap results"
LAYOUT_VERSION = 2

#: The names the job writes at the top of its folder.
OUTPUT_NAMES = frozenset(
    {MANIFEST, INFLIGHT, "predictions.csv", "detections.csv", "results.json", "video_results.json"}
)
_PART = re.compile(r"part-\d{8}-\d{4}-[0-9a-f]{8}\.parquet")
_STAGED = re.compile(r"[a-z][a-z0-9-]{0,40}-[0-9a-f]{8}")


def inside(a: Path, b: Path) -> bool:
    """Whether folder `a` is `b` or lies inside it (after resolving links)."""
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents


# -- the manifest ----------------------------------------------------------------------------


def layout_name(name: Any) -> bool:
    """Whether `name` is a relative name of the job's own layout: a top-level output, a
    committed Parquet part, or a staging folder."""
    if not isinstance(name, str) or name.startswith("/") or "\\" in name:
        return False
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    if len(parts) == 1:
        return name in OUTPUT_NAMES
    if len(parts) == 2 and parts[0] == TABLE:
        return _PART.fullmatch(parts[1]) is not None
    return len(parts) == 2 and parts[0] == STAGING and _STAGED.fullmatch(parts[1]) is not None


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The job's manifest at `path`: None where there is none; FolderError where the file is
    not one this job can prove it wrote (no marker, no run id, a name outside its layout)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise FolderError(f"{path} is not a regular file; it is not this job's manifest")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise FolderError(f"{path} is not a readable run manifest: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FolderError(
            f"{path} was not written by this version of the camera-trap job (it has no "
            f"'format': '{FORMAT}' marker), so nothing in its folder is treated as the job's own"
        )
    names = [*manifest.get("files", []), *manifest.get("staging", [])]
    strange = [n for n in names if not layout_name(n)]
    if not isinstance(manifest.get("run_id"), str) or strange:
        what = f"names outside the job's layout ({strange[:3]})" if strange else "no run id"
        raise FolderError(f"{path} is not a valid run manifest: it lists {what}")
    return manifest


class RunFolder:
    """The files of one results folder, and what ``run.json`` says about them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.table = folder / TABLE
        self.staging = folder / STAGING
        self.manifest_path = folder / MANIFEST
        for own in (self.table, self.staging):
            if os.path.lexists(own) and not real_directory(own):
                raise FolderError(
                    f"{own} is not a real directory (a link or a file); the job writes its own "
                    "folders there and follows no link inside its output folder. Move it away or "
                    "choose another --out"
                )
        self.manifest = read_manifest(self.manifest_path)

    @property
    def written(self) -> set[str]:
        return set(self.manifest.get("files", [])) if self.manifest else set()

    @property
    def staged_folders(self) -> set[str]:
        return set(self.manifest.get("staging", [])) if self.manifest else set()

    def _save(self) -> None:
        assert self.manifest is not None
        self.manifest["files"] = sorted(self.manifest.get("files", []))
        self.manifest["staging"] = sorted(self.manifest.get("staging", []))
        atomic_write(self.manifest_path, json.dumps(self.manifest, indent=1))

    def start(self, run: dict[str, Any]) -> None:
        """Writes the manifest of a run (a new run id; the files already written stay listed)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.manifest = {
            "format": FORMAT,
            "layout": LAYOUT_VERSION,
            "run_id": uuid.uuid4().hex,
            **run,
            "files": sorted(self.written | {MANIFEST}),
            "staging": sorted(self.staged_folders),
        }
        self._save()

    def _names(self, paths: Iterable[Path]) -> set[str]:
        names = {p.relative_to(self.folder).as_posix() for p in paths}
        bad = [n for n in names if not layout_name(n)]
        if bad:
            raise ValueError(f"not a name of the job's layout: {bad}")
        return names

    def record(self, *paths: Path) -> None:
        """Lists files in the manifest before they are written."""
        assert self.manifest is not None
        names = self._names(paths)
        if not names <= self.written:
            self.manifest["files"] = sorted(self.written | names)
            self._save()

    def forget(self, paths: Iterable[Path]) -> None:
        assert self.manifest is not None
        names = self._names(paths)
        self.manifest["files"] = sorted(self.written - names)
        self._save()

    def foreign_files(self, limit: int = 3) -> tuple[int, list[str]]:
        """How many entries of the folder this job did not write, and the first few names
        (links are entries, never followed)."""
        written = self.written | self.staged_folders
        found: list[str] = []
        count = 0
        for root, dirs, files in os.walk(self.folder):
            links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
            empty = [d for d in dirs if d not in links and not os.listdir(os.path.join(root, d))]
            for name in files + links + empty:
                relative = os.path.relpath(os.path.join(root, name), self.folder)
                # An empty staging folder is the job's own (earlier runs left it behind).
                if relative not in written and relative not in (LOCK, EXCLUSIVE_LOCK, STAGING):
                    count += 1
                    if len(found) < limit:
                        found.append(relative)
            dirs[:] = [d for d in dirs if d not in links]
        return count, found

    def remove_own_files(self) -> int:
        """Deletes the files and staging folders the manifest lists, then the job's folders if
        they are left empty; returns how many files went. Nothing else is touched."""
        removed = 0
        for name in sorted(self.written - {MANIFEST}):
            removed += remove_name(self.folder / name)
        self.clean_staging()
        try:
            self.table.rmdir()
        except OSError:
            pass  # missing, or holds something this job did not write
        if self.manifest is not None:
            self.manifest["files"] = [MANIFEST]
            self._save()
        return removed

    # -- staging, commits, in-flight work ----------------------------------------------------

    def clean_staging(self) -> None:
        """Removes the staging folders the manifest lists (what a killed run left half-written,
        never read), and the staging folder itself if that leaves it empty."""
        if self.manifest is None:
            return
        for name in sorted(self.staged_folders):
            remove_tree(self.folder / name)
        if self.staged_folders:
            self.manifest["staging"] = []
            self._save()
        try:
            self.staging.rmdir()
        except OSError:
            pass  # missing, or holds something this job did not write

    def staged(self, name: str) -> Path:
        """A new staging folder for Spark to write into, listed in the manifest first."""
        assert self.manifest is not None
        if os.path.lexists(self.staging) and not real_directory(self.staging):
            raise FolderError(
                f"{self.staging} is not a real directory; the job writes no files there"
            )
        self.staging.mkdir(exist_ok=True)
        path = self.staging / f"{name}-{uuid.uuid4().hex[:8]}"
        self.manifest["staging"] = sorted(self.staged_folders | self._names([path]))
        self._save()
        return path

    def parts(self) -> list[Path]:
        """The committed Parquet files the manifest lists, oldest commit first."""
        prefix = TABLE + "/"
        names = sorted(n for n in self.written if n.startswith(prefix))
        return [
            self.folder / n
            for n in names
            if os.path.lexists(self.folder / n) and stat.S_ISREG(os.lstat(self.folder / n).st_mode)
        ]

    def next_commit(self) -> int:
        prefix = TABLE + "/part-"
        names = [n[len(prefix) :] for n in self.written if n.startswith(prefix)]
        numbers = [int(n.split("-")[0]) for n in names]
        return max(numbers, default=0) + 1

    def commit(self, staged_dir: Path, number: int) -> list[Path]:
        """Moves the Parquet files Spark wrote into `staged_dir` into the table, each with one
        rename; returns the new files."""
        files = sorted(staged_dir.glob("part-*.parquet"))
        if os.path.lexists(self.table) and not real_directory(self.table):
            raise FolderError(
                f"{self.table} is not a real directory; the job writes no files there"
            )
        self.table.mkdir(exist_ok=True)
        targets = [
            self.table / f"part-{number:08d}-{i:04d}-{uuid.uuid4().hex[:8]}.parquet"
            for i in range(len(files))
        ]
        self.record(*targets)
        for source, target in zip(files, targets, strict=True):
            os.rename(source, target)
        self.drop_staged(staged_dir)
        return targets

    def drop_staged(self, staged_dir: Path) -> None:
        """Removes one staging folder the manifest lists (with what Spark left in it)."""
        name = staged_dir.relative_to(self.folder).as_posix()
        assert self.manifest is not None and name in self.staged_folders, name
        remove_tree(staged_dir)
        self.manifest["staging"] = sorted(self.staged_folders - {name})
        self._save()

    def drop_parts(self, parts: Iterable[Path]) -> None:
        parts = list(parts)
        for p in parts:
            remove_name(p)
        self.forget(parts)

    @property
    def inflight_path(self) -> Path:
        return self.folder / INFLIGHT

    def set_inflight(self, paths: list[str], level: int, *, vanished: int = 0) -> None:
        """Records what is being scored: `level` is how finely it was split (0 a commit, 1 a
        sixteenth, 2 one unit alone), `vanished` how often a run was already lost (killed from
        outside, power cut) while scoring these photos."""
        self.record(self.inflight_path)
        state = {"level": level, "paths": paths, "vanished": vanished, "died": False}
        atomic_write(self.inflight_path, json.dumps(state))

    def mark_died(self) -> None:
        """Records that the process scoring the in-flight photos died of them (its Spark JVM or
        worker crashed while they were being scored)."""
        state = self._inflight_state()
        if state is not None:
            atomic_write(self.inflight_path, json.dumps({**state, "died": True}))

    def clear_inflight(self) -> None:
        remove_name(self.inflight_path)

    def _inflight_state(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.inflight_path.read_text())
            if not isinstance(data, dict) or not isinstance(data.get("paths"), list):
                return None
            return data
        except (FileNotFoundError, ValueError):
            return None

    def inflight(self) -> tuple[list[str], int, bool, int]:
        """What a run that stopped unseen was scoring: its photos, how finely they were split,
        whether the run saw its process die of them, and how often runs vanished on them."""
        data = self._inflight_state()
        if data is None:
            return [], 0, False, 0
        try:
            level, vanished = int(data.get("level", 0)), int(data.get("vanished", 0))
        except (TypeError, ValueError):
            level, vanished = 0, 0
        return [str(p) for p in data["paths"]], level, bool(data.get("died")), vanished

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
