"""What a resumable run says as it goes: a line per commit on the console (photos done of the
total, the rate, the time left) and, with ``--progress-json FILE``, one JSON object per commit
appended to FILE for a GUI to read."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from mmlspark.apps.camera_trap.settings import Log


def duration(seconds: float) -> str:
    """``40 s``, ``12 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """The progress of one run: `planned` photos to score, counted as commits land."""

    def __init__(self, command: str, log: Log, feed: str | None = None) -> None:
        self.command = command
        self.log = log
        self.feed = feed
        self.total = 0
        self.done = 0
        self.commits = 0
        self.started = time.perf_counter()

    def planned(self, photos: int, committed_before: int = 0) -> None:
        """`photos` more to score in this run (`committed_before`: results kept from earlier)."""
        self.total += photos
        earlier = f" ({committed_before:,} committed by earlier runs)" if committed_before else ""
        self.log(f"[{self.command}] {photos:,} photos to score{earlier}")

    def committed(self, photos: int) -> None:
        """A commit of `photos` landed: a console line and a feed line."""
        self.done += photos
        self.commits += 1
        elapsed = time.perf_counter() - self.started
        rate = self.done / max(elapsed, 1e-9)
        left = max(self.total - self.done, 0)
        eta = left / rate if rate > 0 else None
        share = self.done / self.total if self.total else 1.0
        # The first commit is a short one (8 photos a core): its rate is the warm-up's estimate.
        when = f"about {duration(eta)} left" if eta is not None and left else "done"
        self.log(
            f"[{self.command}] {self.done:,}/{self.total:,} photos ({share:.0%}), "
            f"{rate:.1f} photos/s, {when}"
        )
        if self.feed:
            self._append(
                {
                    "command": self.command,
                    "commit": self.commits,
                    "photos_done": self.done,
                    "photos_total": self.total,
                    "photos_per_second": round(rate, 3),
                    "elapsed_seconds": round(elapsed, 3),
                    "eta_seconds": None if eta is None else round(eta, 1),
                    "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                }
            )

    def _append(self, entry: dict[str, Any]) -> None:
        # One write of one line, so that a reader never sees half an object (and a run killed
        # mid-write leaves at most a partial last line).
        with open(self.feed, "a", encoding="utf-8") as f:  # type: ignore[arg-type]
            f.write(json.dumps(entry) + "\n")
