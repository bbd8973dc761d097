"""Videos in a survey: each video file is one unit of work whose sampled frames are scored like
photos and committed together, or one failure row when it cannot be read to its end.

Frames are decoded by the Python workers (``mmlspark.image.read_video_frames``: opencv-python's
FFmpeg backend) on either backend: the jar's OpenCV (org.openpnp 4.9.0) is built without FFmpeg
and reads only MJPEG AVI files, so the JVM backend's stages take the frames from there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.settings import JobError
from mmlspark.image import VIDEO_EXTENSIONS, read_files, read_video_frames

#: The committed columns of a frame (null on a photo's row and a failed video's).
FRAME_COLUMNS = "frame_number int, frame_time double, frame_rate double"


@dataclass(frozen=True)
class VideoSampling:
    """Which frames of a video are scored: one every `every_seconds` seconds, or, when
    `every_frames` is positive, every `every_frames`-th frame (both from frame 0)."""

    every_seconds: float = 1.0
    every_frames: int = 0

    def __post_init__(self) -> None:
        if not self.every_seconds > 0 or self.every_frames < 0:
            raise JobError(
                "--video-every-seconds must be positive and --video-every-frames 0 or more, "
                f"not {self.every_seconds} and {self.every_frames}"
            )

    def identity(self) -> dict[str, Any]:
        """What the run's manifest records (nothing for the default, so that results folders of
        runs before videos were read resume as they are)."""
        if self.every_frames > 0:
            return {"video_sampling": f"frames:{self.every_frames}"}
        if self.every_seconds != 1.0:
            return {"video_sampling": f"seconds:{self.every_seconds}"}
        return {}


def is_video_path(path: str) -> bool:
    return path.lower().endswith(VIDEO_EXTENSIONS)


def is_video(column: str = "path") -> Column:
    """Whether the file a path column names is a video, by its name's ending."""
    endings = "|".join(e.lstrip(".") for e in VIDEO_EXTENSIONS)
    # Unicode case-insensitive, as `lower` would make it, without `lower`: on Spark 4 its first
    # use in a JVM sets up the case mappings, over a second of a run's fixed cost.
    return F.col(column).rlike(rf"(?iu)\.({endings})$")


def _no_frame(rows: DataFrame) -> DataFrame:
    return rows.select(
        "*",
        *[F.lit(None).cast(kind).alias(name) for name, kind in _frame_fields()],
    )


def _frame_fields() -> list[tuple[str, str]]:
    return [tuple(f.strip().split(" ")) for f in FRAME_COLUMNS.split(",")]  # type: ignore[misc]


def read_units(
    listing: DataFrame, decoder: Any, sampling: VideoSampling, videos: bool
) -> list[DataFrame]:
    """The decoded rows of a chunk of the listing, as `read_files` gives a photo's, plus the frame
    columns: the photos' rows (null frame columns), and when the chunk holds `videos` the sampled
    frames' rows of its video files, decoded to cover `decoder`'s minimum size. A frame is its own
    burst unit (frames are never averaged together or with photos) and has no burst. Each part
    is scored on its own: column metadata of the photos' images must not reach the frames."""
    photos = listing.filter(~is_video()) if videos else listing
    parts = [_no_frame(read_files(photos, decoder))]
    if videos:
        frames = read_video_frames(
            listing.filter(is_video()),
            everySeconds=sampling.every_seconds,
            everyFrames=sampling.every_frames,
            minHeight=decoder.getMinHeight(),
            minWidth=decoder.getMinWidth(),
        )
        unit = F.concat_ws("#", "path", F.col("frame_number").cast("string"))
        parts.append(
            frames.withColumn("burst", F.lit(None).cast("string")).withColumn("unit", unit)
        )
    return parts


def settle(scored: DataFrame) -> DataFrame:
    """`scored` (a committed table's columns) with each video that failed anywhere (its read, or a
    frame's scoring) as one failure row: the read's reason, else the first failed frame's, and no
    frame, score or detection. Videos read whole and photos are unchanged."""
    by_video = Window.partitionBy("path")
    reason = F.when(
        F.col("failure").isNotNull(),
        F.struct(
            F.col("frame_number").isNull().alias("whole"),
            (-F.coalesce(F.col("frame_number"), F.lit(0))).alias("first"),
            F.when(F.col("frame_number").isNull(), F.col("failure"))
            .otherwise(F.format_string("frame %d: %s", F.col("frame_number"), F.col("failure")))
            .alias("text"),
        ),
    )
    place = Window.partitionBy("path").orderBy(F.col("frame_number").asc_nulls_first())
    marked = (
        scored.withColumn("_failed", F.max(reason).over(by_video)["text"])
        .withColumn("_place", F.row_number().over(place))
        .filter(F.col("_failed").isNull() | (F.col("_place") == 1))
    )
    given = {"path", "length", "modificationTime", "burst"}
    ok = F.col("_failed").isNull()
    return marked.select(
        *[
            F.col(c)
            if c in given
            else F.coalesce(F.col("_failed"), F.col(c)).alias(c)
            if c == "failure"
            else F.when(ok, F.col(c)).alias(c)
            for c in scored.columns
        ]
    )


def union(parts: list[DataFrame]) -> DataFrame:
    first, *rest = parts
    for part in rest:
        first = first.unionByName(part)
    return first
