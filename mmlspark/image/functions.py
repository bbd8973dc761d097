"""Reading image files into DataFrames, and images back into numpy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession

__all__ = ["read_images", "to_ndarray"]

# OpenCV depth codes (type & 7) and the numpy types of their samples.
_DEPTHS = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 5: np.float32}


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
) -> DataFrame:
    """Reads the image files under ``path`` into a DataFrame of ``path``, ``image`` and ``error``.

    Files are listed by Spark's ``binaryFile`` source and decoded with OpenCV in the tasks that
    read them, never on the driver. ``image`` is Spark's image struct (``origin, height, width,
    nChannels, mode, data``; BGR or BGRA channels, OpenCV type codes), readable with
    :func:`to_ndarray` or ``pyspark.ml.image.ImageSchema.toNDArray`` (8-bit only). A file that
    cannot be decoded (not an image, truncated, empty) gives a null ``image`` and an ``error``
    saying why; its row is kept unless ``dropInvalid``.

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

    Examples
    --------
    >>> df = read_images(spark, "photos/", pathGlobFilter="*.jpg")  # doctest: +SKIP
    >>> df.filter("error is not null").select("path", "error").show()  # doctest: +SKIP
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jdf = jvm.mmlspark.image.ImageReader.read(
        spark._jsparkSession,
        path,
        recursive,
        pathGlobFilter,
        float(sampleRatio),
        int(seed),
        colorMode,
        applyOrientation,
        int(reduceFactor),
        dropInvalid,
    )
    return DataFrame(jdf, spark)


def to_ndarray(image: Any) -> np.ndarray:
    """The pixels of an image struct row as a ``height x width x nChannels`` numpy array.

    Handles 8- and 16-bit and float images (``pyspark.ml.image`` reads 8-bit only).
    """
    depth = image["mode"] & 7
    if depth not in _DEPTHS:
        raise ValueError(f"unsupported OpenCV image mode {image['mode']}")
    dtype = np.dtype(_DEPTHS[depth]).newbyteorder("<")
    pixels = np.frombuffer(bytes(image["data"]), dtype=dtype)
    return pixels.reshape(image["height"], image["width"], image["nChannels"]).astype(
        dtype.newbyteorder("=")
    )
