"""File operations of the camera-trap job's results folder that never go through a link and
never leave a half-written file: atomic writes, content hashes, removal of names and trees."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path


class FolderError(Exception):
    """The output folder cannot be used as asked; the message says what is there."""


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Writes `text` (or its pieces) to `path` through a temporary file in the same folder and a
    rename, so that `path` holds the old content or the new, never a part."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "w", encoding="utf-8", newline="") as f:
            for piece in [text] if isinstance(text, str) else text:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def content_hash(path: str | Path) -> str:
    """The SHA-256 of a model file, or of a saved model folder (every file's relative name and
    bytes, in name order): what identifies a model whatever its path."""
    root = Path(path)
    digest = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def real_directory(path: Path) -> bool:
    """Whether `path` is a directory itself, not a link to one (False when it is missing)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def remove_name(path: Path) -> bool:
    """Unlinks `path` if it is a file or a link (never what a link points to)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        return False
    path.unlink()
    return True


def remove_tree(path: Path) -> None:
    """Removes the real directory `path` and what is in it; links inside are removed as names,
    never followed (`shutil.rmtree` works through directory descriptors on this platform)."""
    if real_directory(path):
        shutil.rmtree(path)
    else:
        remove_name(path)
