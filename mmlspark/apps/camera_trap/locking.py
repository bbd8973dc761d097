"""The lock of a results folder: one run at a time, released by the kernel when its holder dies."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from mmlspark.apps.camera_trap.files import FolderError

LOCK = ".lock"
#: Where the lock cannot be an OS lock (a filesystem without flock): created exclusively.
EXCLUSIVE_LOCK = ".lock.exclusive"


#: errno values of a filesystem that has no flock (some network and FUSE filesystems).
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class OutputLock:
    """An exclusive lock on an output folder: `flock` on ``.lock``, held while this object is
    entered. The kernel releases it when the process ends, so a dead holder needs no takeover;
    the file stays (removing it could let two processes lock two different files). It holds the
    holder's host, process and start time, for the message a second run gets.

    Where the filesystem has no locks, the lock is the exclusive creation of ``.lock.exclusive``:
    a run refuses while it exists, and a holder that died leaves it behind (the message says so).
    """

    def __init__(self, folder: Path, *, wait: bool = False, poll_seconds: float = 0.5) -> None:
        self.path = folder / LOCK
        self.exclusive_path = folder / EXCLUSIVE_LOCK
        self.wait = wait
        self.poll_seconds = poll_seconds
        self._fd: int | None = None
        self._exclusive = False

    @staticmethod
    def held(folder: Path) -> bool:
        """Whether a run of this job holds `folder`'s lock now (probed without writing: a folder
        whose lock nobody holds is left byte for byte as it was)."""
        if (folder / EXCLUSIVE_LOCK).exists():
            return True
        try:
            fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)  # and with it the probe's shared lock

    @staticmethod
    def _me() -> bytes:
        holder = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        return json.dumps(holder).encode()

    @staticmethod
    def _holder(path: Path) -> str:
        try:
            holder = json.loads(path.read_text())
            since = time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started", 0)))
            )
            host, pid = holder.get("host", "?"), holder.get("pid", "?")
            return f"host {host}, process {pid}, since {since}"
        except (OSError, ValueError, TypeError, AttributeError):
            return "holder unknown"

    def __enter__(self) -> OutputLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not self.wait:
                        raise FolderError(
                            f"{self.path.parent} is in use by another run of this job "
                            f"({self._holder(self.path)}); wait for it to finish (or pass "
                            "--wait), or choose another --out"
                        ) from None
                    time.sleep(self.poll_seconds)
                except OSError as e:
                    if e.errno not in _NO_LOCKS:
                        raise
                    os.close(fd)
                    fd = -1
                    self._take_exclusive()
                    return self
            os.ftruncate(fd, 0)
            os.pwrite(fd, self._me(), 0)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        self._fd = fd
        return self

    def _take_exclusive(self) -> None:
        while True:
            try:
                fd = os.open(self.exclusive_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self.wait:
                    time.sleep(self.poll_seconds)
                    continue
                raise FolderError(
                    f"{self.path.parent} is on a filesystem without file locks and "
                    f"{self.exclusive_path.name} says another run of this job uses it "
                    f"({self._holder(self.exclusive_path)}); wait for it to finish, or, if no "
                    f"such run is alive, delete {self.exclusive_path}"
                ) from None
            with os.fdopen(fd, "wb") as f:
                f.write(self._me())
            self._exclusive = True
            return

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
        if self._exclusive:
            self.exclusive_path.unlink(missing_ok=True)
            self._exclusive = False
