"""The executors' limits and settings, and reading the files Spark names.

A Python worker bounds the memory of a row before it allocates it, as the JVM does: an image over
``spark.mmlspark.image.maxPixels`` decoded pixels, or a file over
``spark.mmlspark.image.maxFileBytes`` bytes, is a row error. Without the settings the limits are
the worker's share of the memory it really has (its cgroup's limit in a container, or Spark's
``spark.executor.pyspark.memory`` share). Files are read from local paths and the mounts that
look like them (``file:``, Databricks' ``/dbfs`` and ``/Volumes``).
"""

from __future__ import annotations

import os
from pathlib import Path

from mmlspark._engine.messages import row_message
from mmlspark._engine.rows import RowError

MAX_PIXELS_KEY = "spark.mmlspark.image.maxPixels"
MAX_FILE_BYTES_KEY = "spark.mmlspark.image.maxFileBytes"
# Heap bytes the JVM side assumes per decoded pixel (ImageLimits.BytesPerPixel); the Python
# workers take the same share of the machine's memory per core.
_BYTES_PER_PIXEL = 30
#: EXIF lives in the JPEG's APP1 segment, at most 64 KiB, near the start of the file.
HEAD_BYTES = 128 << 10


def max_pixels(setting: str | None) -> int:
    """Decoded pixels one image may have: the setting, else each core's share of 60% of this
    machine's memory at the JVM side's bytes per pixel."""
    if setting is not None:
        return _positive_setting(MAX_PIXELS_KEY, setting)
    return int(_slot_budget() / _BYTES_PER_PIXEL)


def max_file_bytes(setting: str | None) -> int:
    """Bytes one encoded file may have: the setting, else a quarter of a core's share (the JVM's
    ``ImageLimits.maxFileBytes``)."""
    if setting is not None:
        return _positive_setting(MAX_FILE_BYTES_KEY, setting)
    return min(int(_slot_budget() / 4), 2**31 - 17)


def _positive_setting(key: str, setting: str) -> int:
    try:
        value = int(setting.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{key} must be a positive whole number, not '{setting}'")
    return value


#: Where the kernel shows this process's control group (its memory and CPU limits).
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_value(*names: str) -> str | None:
    """The first of the cgroup files `names` (v2, then v1) that can be read, stripped."""
    for name in names:
        try:
            return (CGROUP_ROOT / name).read_text().strip()
        except OSError:
            continue
    return None


def _memory_limit() -> int:
    """Bytes this process may use: the machine's memory, or its cgroup's limit where lower (a
    container on a large host)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = _cgroup_value("memory.max", "memory/memory.limit_in_bytes")
    if limit and limit.isdigit():
        memory = min(memory, int(limit))
    return memory


def _cpus() -> int:
    """The cores this process may run on: its CPU affinity, or its cgroup's CPU quota where
    lower."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cgroup_value("cpu.max")
    if quota and quota.split()[0].isdigit():
        share, period = quota.split()[:2]
        cpus = min(cpus or 1, max(1, -(-int(share) // int(period))))
    else:
        v1 = _cgroup_value("cpu/cpu.cfs_quota_us"), _cgroup_value("cpu/cpu.cfs_period_us")
        if v1[0] and v1[1] and v1[0].isdigit() and v1[1].isdigit():
            cpus = min(cpus or 1, max(1, -(-int(v1[0]) // int(v1[1]))))
    return max(1, cpus or 1)


def _slot_budget() -> float:
    """Bytes one task's Python worker may take: 60% of its share of the memory it really has.
    Under ``spark.executor.pyspark.memory`` Spark gives each worker its share
    (``PYSPARK_EXECUTOR_MEMORY_MB``); else the process's memory (the cgroup's limit in a
    container) is shared by the cores it may use, as the JVM shares its heap by task slots."""
    worker_mb = os.environ.get("PYSPARK_EXECUTOR_MEMORY_MB", "")
    if worker_mb.isdigit() and int(worker_mb) > 0:
        return int(worker_mb) * 2**20 * 0.6
    return _memory_limit() * 0.6 / _cpus()


#: Where Databricks mounts its filesystems for local processes.
MOUNTS = {"dbfs:/Volumes/": "/Volumes/", "dbfs:/": "/dbfs/"}


def local_file(path: str) -> str:
    """The local path of a file that Spark names `path` (``file:`` URIs, and the ``dbfs:`` paths
    that Databricks mounts at ``/Volumes`` and ``/dbfs``); other filesystems are refused as a
    row error. Spark's file sources give percent-encoded URIs: a name is decoded when the raw one
    does not exist."""
    from urllib.parse import unquote

    if path.startswith("file:"):
        local = path[len("file:") :]
        if local.startswith("//"):
            host, slash, rest = local[2:].partition("/")
            if host not in ("", "localhost"):
                raise RowError(f"cannot read the file: it is on host {host}, not this machine")
            local = slash + rest
    else:
        local = next((m + path[len(p) :] for p, m in MOUNTS.items() if path.startswith(p)), "")
        if not local:
            scheme = path.split(":", 1)[0] if ":" in path.split("/", 1)[0] else ""
            if scheme:
                raise RowError(
                    f"cannot read the file: the Python backend reads local and mounted paths "
                    f"(file:, /dbfs, /Volumes), not {scheme}: paths; mount the storage, or read "
                    "it with the jar's backend"
                )
            local = path
    if "%" in local and not os.path.lexists(local):
        local = unquote(local)
    return local


def _reason(error: OSError) -> str:
    """An OSError as ``ImageFiles.reason`` words the JVM's."""
    import errno

    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ENOENT:
        return "no such file (removed while reading?)"
    if error.errno == errno.EISDIR:
        return "is a folder"
    return error.strerror or type(error).__name__


def read_file(path: str, limit: int, head: int | None = None) -> bytes:
    """The bytes of the file Spark names `path` (the first `head` bytes only, when given),
    refused before reading when over `limit` bytes (the JVM's ``ImageFiles.readBytes``)."""
    local = local_file(path)
    try:
        with open(local, "rb") as f:
            if head is not None:
                return f.read(head)
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise RowError(
                    row_message("fileOverLimit", size=size, limit=limit, key=MAX_FILE_BYTES_KEY)
                )
            return f.read()
    except OSError as error:
        raise RowError(f"cannot read the file: {_reason(error)}") from None
