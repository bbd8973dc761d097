"""Paths of the camera-trap job's inputs: local forms of `file:` URIs, and the hidden names that
Spark's file listing leaves out (names starting with ``.`` or ``_``), which the job lists itself
so that every name under ``--images`` gives one row."""

from __future__ import annotations

import datetime
import os
import re
import urllib.parse
from pathlib import Path

#: The start of the failure of a hidden name the job did not score.
HIDDEN_SKIPPED = "skipped: its name starts with '.' or '_'"

#: A listing row: path, length, modificationTime, error.
Entry = tuple[str, int, "datetime.datetime | None", "str | None"]


def local_path(path: str) -> Path | None:
    """The local filesystem path `path` names (a plain path or a `file:` URI in any of its
    forms), or None for another filesystem's URI (hdfs:, s3a:, dbfs:, ...)."""
    if path.startswith("file:"):
        parsed = urllib.parse.urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            return None
        return Path(urllib.parse.unquote(parsed.path))
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path):
        return None
    return Path(path)


def hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _entry(path: str, info: os.stat_result, error: str | None) -> Entry:
    when = datetime.datetime.fromtimestamp(info.st_mtime_ns // 1_000_000 / 1000)
    return (path, info.st_size, when, error)


def hidden_entries(root: str, *, include: bool) -> list[Entry]:
    """The listing rows of the hidden names under the local folder `root` (as Spark names it,
    `file:/...`): without `include`, one failure row per hidden file or folder (a folder as a
    whole), with the file's size and time so that a later run that includes them keeps its row
    unless the file changed; with `include`, every file under a hidden name as an ordinary row.
    Links are followed as Spark's listing follows them, each real folder walked once; only
    hidden names are stat'ed. A root that is not a local folder has none (its listing is the
    filesystem's)."""
    local = local_path(root)
    if local is None or not local.is_dir():
        return []
    rows: list[Entry] = []
    seen: set[tuple[int, int]] = set()
    skipped_file = (
        f"{HIDDEN_SKIPPED} (hidden, as Spark's file sources treat it); --include-hidden scores it"
    )
    skipped_folder = f"{HIDDEN_SKIPPED}, so the folder was not read; --include-hidden scores it"

    def walk(folder: Path, name: str, inside_hidden: bool) -> None:
        try:
            info = folder.stat()
            if (info.st_dev, info.st_ino) in seen:
                return
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(folder) as scan:
                children = sorted(scan, key=lambda e: e.name)
        except OSError:
            return  # Spark's listing reports a folder it cannot list
        for child in children:
            child_name = f"{name}/{child.name}"
            try:
                is_folder = child.is_dir()  # follows links; a stat only for links
                if not (inside_hidden or hidden(child.name)):
                    if is_folder:
                        walk(Path(child.path), child_name, False)
                elif is_folder:
                    if include:
                        walk(Path(child.path), child_name, True)
                    else:
                        rows.append((child_name, 0, None, skipped_folder))
                elif child.is_file():
                    rows.append(_entry(child_name, child.stat(), None if include else skipped_file))
            except OSError:
                continue  # a broken link: Spark's listing reports it where it is visible

    walk(local, root.rstrip("/"), False)
    return rows
