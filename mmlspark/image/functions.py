"""Reading image files into DataFrames, and images back into numpy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from mmlspark._engine.structs import struct_array
from mmlspark._engine.video import VIDEO_EXTENSIONS as _VIDEO_EXTENSIONS
from mmlspark.core.backend import files_in_python
from mmlspark.image import _jvm

__all__ = [
    "read_images",
    "read_image_stream",
    "list_files",
    "read_files",
    "read_bytes",
    "taken_times",
    "to_ndarray",
    "read_video_frames",
    "VIDEO_EXTENSIONS",
]

#: The file name endings :func:`read_video_frames` reads as videos (MegaDetector's list).
VIDEO_EXTENSIONS = _VIDEO_EXTENSIONS


def read_images(
    spark: SparkSession,
    path: str,
    recursive: bool = True,
    pathGlobFilter: str | None = None,
    sampleRatio: float = 1.0,
    *,
    seed: int = 0,
    colorMode: str = "color",
    applyOrientation: bool = True,
    reduceFactor: int = 1,
    dropInvalid: bool = False,
    minHeight: int = 0,
    minWidth: int = 0,
    backend: str | None = None,
) -> DataFrame:
    """Reads the image files under ``path`` into a DataFrame of ``path``, ``image`` and ``error``.

    Files are listed on the driver (see :func:`list_files`: every file, broken link, folder that
    cannot be listed and symbolic-link loop gives exactly one row, a file reached by two paths
    is read once) and read and decoded with OpenCV in the tasks, never on the driver. A file that
    cannot be read (permission denied) is a row with its reason, never a failed job. Images over
    the executors' pixel limit (``spark.mmlspark.image.maxPixels``, by default what one task's
    share of the heap holds) are refused from their header, before any memory is allocated.
    ``image`` is Spark's image struct (``origin, height, width,
    nChannels, mode, data``; BGR or BGRA channels, OpenCV type codes), readable with
    :func:`to_ndarray` or ``pyspark.ml.image.ImageSchema.toNDArray`` (8-bit only). A file that
    cannot be decoded (not an image, truncated, empty) gives a null ``image`` and an ``error``
    saying why; its row is kept unless ``dropInvalid``.

    ``image`` records how it was read in its column metadata: an ``ImageTransformer`` with
    ``reducedDecode`` (the default) on it, whose operations start with a resize, decodes each file
    again from the image's origin at the smallest JPEG scale that covers the resize, as it does on
    encoded bytes. On this function's own output (on the JVM in a classic session; on the Python
    backend wherever its workers read the files themselves) the transformer reads the files itself
    and ``image`` is computed only where something reads it (``ONNXModel`` passes it on without
    computing it).

    Parameters
    ----------
    spark : SparkSession
        A session with mmlspark loaded (``mmlspark.session()``).
    path : str
        A file, a folder or a glob, on any filesystem Spark reads.
    recursive : bool
        Also read the folders under ``path``.
    pathGlobFilter : str, optional
        Only files whose name matches this glob, e.g. ``"*.jpg"``.
    sampleRatio : float
        Fraction of the files to read, in (0, 1], drawn with ``seed``.
    colorMode : str
        ``"color"`` (8-bit BGR), ``"grayscale"`` or ``"unchanged"`` (as stored: gray, BGR or
        BGRA, 8 or 16 bits).
    applyOrientation : bool
        Rotate or flip JPEGs as their EXIF orientation says.
    reduceFactor : int
        Decode at 1/2, 1/4 or 1/8 of the size (1: full size), for very large images.
    dropInvalid : bool
        Drop the files that cannot be decoded.
    minHeight, minWidth : int
        When either is positive, decode JPEGs at the smallest of 1/8, 1/4, 1/2 and full scale
        that still covers ``minHeight x minWidth`` (in place of ``reduceFactor``): for pipelines
        that resize to a smaller size anyway, much faster and smaller on large photos.
    backend : str, optional
        ``"jvm"``, ``"python"`` or ``"auto"`` for the decoding (default:
        :func:`mmlspark.set_backend`'s setting).

    Examples
    --------
    >>> df = read_images(spark, "photos/", pathGlobFilter="*.jpg")  # doctest: +SKIP
    >>> df.filter("error is not null").select("path", "error").show()  # doctest: +SKIP

    Over Spark Connect and on the Python backend the same DataFrame is built from Spark's
    ``binaryFile`` source and :class:`ImageDecoder`; there, zero-length files get no row (that
    source skips them) and the files are not regrouped into larger partitions.
    """
    from pyspark.sql.utils import is_remote

    if not 0.0 < sampleRatio <= 1.0:
        raise ValueError(f"read_images: sampleRatio must be in (0, 1] but was {sampleRatio}")
    decoder = _decoder(
        colorMode, applyOrientation, reduceFactor, dropInvalid, minHeight, minWidth, backend
    )
    if is_remote() or decoder.getBackend() == "python":
        files = _binary_files(spark.read, recursive, pathGlobFilter).load(path)
        if sampleRatio < 1.0:
            files = files.sample(withReplacement=False, fraction=sampleRatio, seed=seed)
        if decoder.getBackend() == "python" and _python_readable(path):
            return _read_in_python(spark, files, decoder)
        return _decoded(files, decoder)
    return _jvm.read_images(
        spark,
        path=path,
        recursive=recursive,
        path_glob_filter=pathGlobFilter,
        sample_ratio=sampleRatio,
        seed=seed,
        decoder=decoder,
    )


def list_files(
    spark: SparkSession,
    path: str,
    recursive: bool = True,
    pathGlobFilter: str | None = None,
    *,
    backend: str | None = None,
) -> DataFrame:
    """The files under ``path`` as a DataFrame of ``path``, ``length``, ``modificationTime`` and
    ``error``, in path order.

    With the jar (``backend``, default :func:`mmlspark.set_backend`'s setting, decides) the files
    are listed on the driver: every regular file appears once, under the first path (in name
    order) that reaches it, so a photo reached through a second link is not listed twice; a
    broken symbolic link, a folder that cannot be listed and a symbolic link looping back to a
    folder above it appear once each, with the reason in ``error``. Names starting with ``.`` or
    ``_`` are skipped, as Spark's file sources do. :func:`read_files` reads and decodes such a
    listing.

    Over Spark Connect and on the Python backend the listing is Spark's ``binaryFile`` source's
    (its file contents are not read): there, zero-length files, broken links and folders that
    cannot be listed get no row, and a file reached by two paths is listed under both.
    """
    if files_in_python(spark, backend):
        from pyspark.sql import functions as F

        files = _binary_files(spark.read, recursive, pathGlobFilter).load(path)
        return files.select(
            "path", "length", "modificationTime", F.lit(None).cast("string").alias("error")
        ).orderBy("path")
    return _jvm.list_files(spark, path=path, recursive=recursive, path_glob_filter=pathGlobFilter)


def read_files(files: DataFrame, decoder: Any) -> DataFrame:
    """Reads and decodes the files of a :func:`list_files` DataFrame in the tasks, with the
    settings of ``decoder`` (an :class:`ImageDecoder`; its columns are ignored): adds ``image``
    and sets ``error`` to the listing's, the read's or the decode's error. Other columns are kept.

    On the decoder's Python backend (and over Spark Connect) the files are read by the Python
    workers, from local paths and the mounts that look like them (``file:``, and Databricks'
    ``/dbfs`` and ``/Volumes``); a file elsewhere gets a row with that reason.
    """
    if files_in_python(files.sparkSession, decoder.getBackend()):
        from mmlspark.image import _backend

        return _backend.read_files(decoder, files)  # type: ignore[no-any-return]
    return _jvm.read_files(files, decoder=decoder)


def read_video_frames(
    files: DataFrame,
    *,
    everySeconds: float = 1.0,
    everyFrames: int = 0,
    minHeight: int = 0,
    minWidth: int = 0,
) -> DataFrame:
    """The sampled frames of the video files of a :func:`list_files` DataFrame, one row each:
    the listing's columns but ``error``, then ``frame_number`` (int, from 0), ``frame_time``
    (seconds, ``frame_number / frame_rate``), ``frame_rate`` (frames per second, as the file
    states it), ``image`` (Spark's image struct, BGR) and ``error``.

    Frames are read in the tasks by the Python workers with opencv-python's FFmpeg backend (H.264,
    HEVC, MJPEG, MPEG-4, ... in MP4, MOV, AVI, MKV), on any session and either backend, from local
    and mounted paths as :func:`read_bytes` reads them. Each file is read once, front to back, and
    only the sampled frames are converted and kept: a task holds one frame at a time. Sampling
    follows MegaDetector: every ``everyFrames``-th frame from frame 0 when it is positive, else
    every ``int(everySeconds * frame_rate)``-th (at least every frame). With ``minHeight`` or
    ``minWidth``, frames are reduced (area interpolation) to the smallest of 1/8, 1/4, 1/2 and
    full size that still covers them, as a JPEG photo is decoded at a reduced scale.

    A file that cannot be read to its end (not a video, corrupt, truncated, an unsupported codec,
    the listing's own error) gets one more row after any frames it gave: a null
    ``frame_number`` and ``image`` and the reason in ``error``. Such a file's frames are partial
    and should be dropped (``job`` does, so that a video is scored whole or is one failure row).

    Examples
    --------
    >>> frames = read_video_frames(list_files(spark, "clips/"), everySeconds=2.0)  # doctest: +SKIP
    """
    from mmlspark._engine.video import Sampling
    from mmlspark.image import _backend

    if everyFrames < 0 or not everySeconds > 0:
        raise ValueError(
            "read_video_frames: everyFrames must be 0 or more and everySeconds positive, but were "
            f"{everyFrames} and {everySeconds}"
        )
    sampling = Sampling(float(everySeconds), int(everyFrames), int(minHeight), int(minWidth))
    return _backend.video_frames(files, sampling)  # type: ignore[no-any-return]


def read_bytes(path: str, *, maxBytes: int) -> bytes:
    """The bytes of the file that Spark names ``path``, read by this Python process as the Python
    backend's tasks read files: a local path, a ``file:`` URI (``file:/a``, ``file:///a``,
    ``file://localhost/a``; percent-decoded when the name as given does not exist) or a
    Databricks ``dbfs:`` path (read from its ``/dbfs`` or ``/Volumes`` mount).

    Raises a ValueError naming why, with the Python backend's words, for a file on another
    filesystem or host, one that cannot be read, and one over ``maxBytes`` bytes (refused before
    it is read).

    Examples
    --------
    >>> data = read_bytes("file:///photos/a.jpg", maxBytes=64 << 20)  # doctest: +SKIP
    """
    from mmlspark._engine.files import read_file

    return read_file(path, maxBytes)


def taken_times(files: DataFrame, outputCol: str) -> DataFrame:
    """``files`` (a listing with a ``path`` column, as :func:`list_files` gives it) with
    ``outputCol``, a double: each photo's EXIF DateTimeOriginal in seconds, the camera's local
    time read as if it were UTC (only differences between photos mean something), or null for a
    file that is not a JPEG, has no such time or cannot be read.

    Only the first 128 KiB of each file are read, in the tasks, by the Python workers, from local
    and mounted paths as :func:`read_bytes` reads them, on any session (no jar needed).

    Examples
    --------
    >>> timed = taken_times(list_files(spark, "photos/"), "taken")  # doctest: +SKIP
    """
    from mmlspark.image import _backend

    return _backend.taken_times(files, outputCol)  # type: ignore[no-any-return]


def read_image_stream(
    spark: SparkSession,
    path: str,
    pathGlobFilter: str | None = None,
    maxFilesPerTrigger: int | None = None,
    *,
    recursive: bool = True,
    colorMode: str = "color",
    applyOrientation: bool = True,
    reduceFactor: int = 1,
    dropInvalid: bool = False,
    backend: str | None = None,
) -> DataFrame:
    """A streaming DataFrame of ``path``, ``image`` and ``error`` for the image files that
    appear under ``path``: each new file is read once, decoded like :func:`read_images` does.

    Score it with a saved pipeline and write it with a checkpoint; each file then gives exactly
    one output row, across restarts. Works on classic and Spark Connect sessions, on either
    backend (``backend``: as :func:`read_images` takes it).

    Examples
    --------
    >>> photos = read_image_stream(spark, "incoming/", pathGlobFilter="*.jpg")  # doctest: +SKIP
    >>> (PipelineModel.load("model/").transform(photos)
    ...     .select("path", "prediction", "error").writeStream.format("parquet")
    ...     .option("checkpointLocation", "checkpoints/").trigger(availableNow=True)
    ...     .start("scored/").awaitTermination())  # doctest: +SKIP
    """
    # The binaryFile source's fixed schema; a stream needs it given.
    schema = "path string, modificationTime timestamp, length long, content binary"
    reader = _binary_files(spark.readStream.schema(schema), recursive, pathGlobFilter)
    if maxFilesPerTrigger is not None:
        reader = reader.option("maxFilesPerTrigger", int(maxFilesPerTrigger))
    decoder = _decoder(colorMode, applyOrientation, reduceFactor, dropInvalid, 0, 0, backend)
    return _decoded(reader.load(path), decoder)


def _binary_files(reader: Any, recursive: bool, pathGlobFilter: str | None) -> Any:
    reader = reader.format("binaryFile").option("recursiveFileLookup", str(recursive).lower())
    return reader if pathGlobFilter is None else reader.option("pathGlobFilter", pathGlobFilter)


def _decoder(
    colorMode: str,
    applyOrientation: bool,
    reduceFactor: int,
    dropInvalid: bool,
    minHeight: int,
    minWidth: int,
    backend: str | None = None,
) -> Any:
    """The ImageDecoder of the readers: it reads Spark's binaryFile columns (:func:`read_files`
    ignores its columns)."""
    from mmlspark.image import ImageDecoder

    decoder = ImageDecoder(
        inputCol="content",
        originCol="path",
        colorMode=colorMode,
        applyOrientation=applyOrientation,
        reduceFactor=reduceFactor,
        minHeight=minHeight,
        minWidth=minWidth,
        dropInvalid=dropInvalid,
    )
    return decoder if backend is None else decoder.setBackend(backend)


def _python_readable(path: str) -> bool:
    """Whether the Python workers can open the files under `path` themselves: a local path or a
    Databricks mount (``file:``, ``dbfs:``, no scheme)."""
    import re

    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):", path)
    return scheme is None or scheme.group(1).lower() in ("file", "dbfs")


#: Files per task that `read_images` on the Python backend aims at: a task costs its Python
#: worker about 50 ms to start (the UDF's code is unpickled each time), so a task of one file, as
#: a small ``spark.sql.files.maxPartitionBytes`` makes them, runs several times slower.
FILES_PER_TASK = 64


def _read_in_python(spark: SparkSession, files: DataFrame, decoder: Any) -> DataFrame:
    """`read_images`' columns from the files of Spark's binaryFile source without their contents:
    the listing is spread over whole waves of tasks of about FILES_PER_TASK files (the source's
    partitions are packed by bytes: a few uneven ones, or one per file) and each Python
    worker reads and decodes its files, so the bytes never pass through the JVM."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import is_remote

    from mmlspark.core.session import default_parallelism
    from mmlspark.image import _backend

    cores = default_parallelism(spark)
    listing = files.select("path", F.lit(None).cast("string").alias("error"))
    if is_remote():
        listing = listing.repartition(cores)
        return _backend.read_files(
            decoder, listing, ("path",), _backend.read_metadata(decoder), True
        )  # type: ignore[no-any-return]
    # The number of files, from the driver's listing (no job, one call).
    listed = len(files._jdf.inputFiles())
    count = max(1, -(-listed // (cores * FILES_PER_TASK))) * cores
    if files.rdd.getNumPartitions() >= 4 * count:
        # Many small partitions (one file each under a small maxPartitionBytes): merged, not
        # shuffled, since a shuffle's map side would run a JVM task for each.
        listing = listing.coalesce(count)
    else:
        listing = listing.repartition(count)
    read = _backend.read_metadata(decoder)
    return _backend.read_files(decoder, listing, ("path",), read, True)  # type: ignore[no-any-return]


def _decoded(files: DataFrame, decoder: Any) -> DataFrame:
    """`read_images`' columns from the rows of Spark's binaryFile source, ``image`` marked with
    the read's settings (an ImageTransformer may decode its files again, smaller)."""
    from mmlspark.image import _backend

    read = _backend.read_metadata(decoder)
    if decoder.getBackend() == "python":
        # only path, image and error leave the UDF (the next Python stage may join it)
        return _backend.transform_decoder(decoder, files.select("path", "content"), ("path",), read)  # type: ignore[no-any-return]
    decoded = decoder.transform(files.select("path", "content"))
    # withMetadata: Spark Connect's withColumn drops an alias's metadata
    return decoded.select("path", "image", "error").withMetadata("image", read)  # type: ignore[no-any-return]


def to_ndarray(image: Any) -> np.ndarray:
    """The pixels of an image struct row as a ``height x width x nChannels`` numpy array.

    Handles 8- and 16-bit and float images (``pyspark.ml.image`` reads 8-bit only).
    """
    return struct_array(image)
