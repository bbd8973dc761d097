"""Video files as rows of sampled frames, in the Python workers, with opencv-python's FFmpeg
backend: a file is read once, front to back (frames that are not sampled are grabbed, never
converted), and each sampled frame leaves as its own Arrow batch, so a task holds one frame at a
time whatever the video's length or resolution.

The sampling rule is MegaDetector's (its ``video_utils``): every k-th frame from frame 0, or, for
a rate in seconds, every ``int(seconds * fps)``-th (at least every frame)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.files import local_file
from mmlspark._engine.rows import RowError, describe
from mmlspark._engine.structs import image_array, to_struct

#: The file name endings read as videos (MegaDetector's ``VIDEO_EXTENSIONS``).
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mpeg", ".mpg", ".mov", ".mkv", ".flv")

#: The columns a frame row adds, before ``image`` and ``error``.
FRAME_COLUMNS = ("frame_number", "frame_time", "frame_rate")


def is_video(path: str) -> bool:
    return path.lower().endswith(VIDEO_EXTENSIONS)


@dataclass(frozen=True)
class Sampling:
    """Which frames are kept: every `every_frames`-th, or (when it is 0) one every
    `every_seconds`; frames are reduced to the smallest of 1/8, 1/4, 1/2 and full size that still
    covers `min_h` x `min_w` (0: full size), as a photo's JPEG decode is."""

    every_seconds: float = 1.0
    every_frames: int = 0
    min_h: int = 0
    min_w: int = 0

    def step(self, fps: float) -> int:
        """The frame interval of a video at `fps` frames per second."""
        if self.every_frames > 0:
            return self.every_frames
        if not (fps > 0 and math.isfinite(fps)):
            raise RowError(
                "not a readable video: it states no frame rate, so frames cannot be sampled "
                "by time (sample by frame count instead)"
            )
        return max(1, int(self.every_seconds * fps))


def reduction(height: int, width: int, min_h: int, min_w: int) -> int:
    """The largest of 8, 4, 2 that keeps a `height` x `width` frame at or over `min_h` x `min_w`
    (1 when none does, or no minimum is set)."""
    if min_h <= 0 and min_w <= 0:
        return 1
    for factor in (8, 4, 2):
        if -(-height // factor) >= min_h and -(-width // factor) >= min_w:
            return factor
    return 1


def _reduced(frame: np.ndarray, factor: int) -> np.ndarray:
    import cv2

    if factor == 1:
        return frame
    height, width = frame.shape[:2]
    size = (-(-width // factor), -(-height // factor))
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


def sampled_frames(path: str, sampling: Sampling) -> Iterator[tuple[int, float, float, Any]]:
    """(frame number, time in seconds, frame rate, BGR frame) of the sampled frames of the video
    Spark names `path`, read in order. Raises RowError, with the reason, for a file that cannot be
    opened, holds no frame, or ends well before the frame count its header states (truncated);
    frames already given stay given, so a caller that streams them must drop them on that error."""
    import cv2

    local = local_file(path)
    capture = cv2.VideoCapture(local, cv2.CAP_FFMPEG)
    try:
        if not capture.isOpened():
            raise RowError("not a readable video: no decoder here opens it (corrupt, truncated "
                           "or an unsupported format)")  # fmt: skip
        fps = float(capture.get(cv2.CAP_PROP_FPS))
        stated = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        step = sampling.step(fps)
        number = 0
        factor = 0
        while True:
            if number % step == 0:
                ok, frame = capture.read()
                if not ok:
                    break
                if factor == 0:
                    h, w = frame.shape[:2]
                    factor = reduction(h, w, sampling.min_h, sampling.min_w)
                time = number / fps if fps > 0 and math.isfinite(fps) else float("nan")
                yield number, time, fps, _reduced(frame, factor)
            elif not capture.grab():
                break
            number += 1
        if number == 0:
            raise RowError("not a readable video: no frame could be decoded")
        # A stated count is an estimate in some containers: a few frames short is not truncation.
        if stated > 0 and number < stated - max(2, stated // 100):
            raise RowError(
                f"truncated or corrupt video: decoding stopped at frame {number} of the "
                f"{stated} its header states"
            )
    finally:
        capture.release()


def _frame_batch(
    keep: tuple[str, ...],
    kept: list[Any],
    path: str | None,
    frame: tuple[int, float, float, Any] | None,
    error: str | None,
) -> Any:
    """One output row: the listing's `kept` cells, then a sampled `frame` or a failure."""
    import pyarrow as pa  # type: ignore[import-untyped]

    number, time, fps, image = frame if frame is not None else (None, None, None, None)
    return pa.RecordBatch.from_arrays(
        [
            *kept,
            pa.array([number], pa.int32()),
            pa.array([time], pa.float64()),
            pa.array([fps], pa.float64()),
            image_array([None if image is None else to_struct(image, path)]),
            pa.array([error], pa.string()),
        ],
        names=[*keep, *FRAME_COLUMNS, "image", "error"],
    )


def frames_partition(sampling: Sampling, keep: tuple[str, ...], batches: Iterator[Any]) -> Any:
    """The rows of a listing (``path``, ``error`` and the columns `keep`) as frame rows: the
    `keep` columns, then ``frame_number``, ``frame_time``, ``frame_rate``, ``image`` and
    ``error``. A sampled frame is a row with its image; a file that failed (the listing's error,
    or any reason the video could not be read to its end) gets one more row with a null frame
    number, a null image and the reason in ``error``: it comes after any frames already given,
    and a reader drops a video's frames when it sees it. Each row is a batch of its own, so a
    task holds one frame at a time."""
    for batch in batches:
        paths = batch.column("path").to_pylist()
        errors = batch.column("error").to_pylist()
        for i, (path, listed) in enumerate(zip(paths, errors, strict=True)):
            row = batch.slice(i, 1)
            kept = [row.column(name) for name in keep]
            if listed is not None or path is None:
                yield _frame_batch(keep, kept, path, None, listed or "no path")
                continue
            try:
                for frame in sampled_frames(path, sampling):
                    yield _frame_batch(keep, kept, path, frame, None)
            except Exception as e:  # noqa: BLE001 - any reason is the video's failure row
                yield _frame_batch(keep, kept, path, None, describe(e))
