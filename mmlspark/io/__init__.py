"""SynapseML's reader spellings. After ``import mmlspark.io`` (or ``from mmlspark.io import *``,
as SynapseML's documentation imports ``synapse.ml.io``), ``spark.read.image()`` and
``spark.readStream.image()`` take Spark reader options and read image files with
:func:`mmlspark.image.read_images` and :func:`mmlspark.image.read_image_stream`, on classic and
Spark Connect sessions alike::

    from mmlspark.io import *
    images = spark.read.image().option("dropInvalid", True).load("/data/photos")

The DataFrame has the layout of Spark's image source (``spark.read.format("image")``) and of
SynapseML's reader: ``image``, Spark's image struct, is its first column, so ``row[0]`` and
``row.image`` are the image; ``path`` and ``error`` (why a file gave no image) follow it, as
``read_images`` gives them.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from mmlspark.core.backend import files_in_python
from mmlspark.core.fused import reordered
from mmlspark.image import _jvm
from mmlspark.image.functions import read_image_stream, read_images

__all__ = ["ImageReader"]


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"expected true or false, not {value!r}")
    return text == "true"


#: Reader options, in any case -> (the read_images / read_image_stream keyword, its parser).
_OPTIONS: dict[str, tuple[str, Any]] = {
    "dropinvalid": ("dropInvalid", _flag),
    "recursivefilelookup": ("recursive", _flag),
    "recursive": ("recursive", _flag),
    "pathglobfilter": ("pathGlobFilter", str),
    "colormode": ("colorMode", str),
    "applyorientation": ("applyOrientation", _flag),
    "reducefactor": ("reduceFactor", int),
    "sampleratio": ("sampleRatio", float),
    "seed": ("seed", int),
    "maxfilespertrigger": ("maxFilesPerTrigger", int),
}
_BATCH_ONLY = {"sampleRatio", "seed"}
_STREAM_ONLY = {"maxFilesPerTrigger"}


class ImageReader:
    """What ``spark.read.image()`` and ``spark.readStream.image()`` return: ``option`` and
    ``options`` as on Spark's readers (names in any case; unknown ones are refused, naming the
    known), then ``load(path)``."""

    def __init__(self, spark: SparkSession, *, streaming: bool = False) -> None:
        self._spark = spark
        self._streaming = streaming
        self._given: dict[str, Any] = {}

    def _known(self) -> set[str]:
        other = _BATCH_ONLY if self._streaming else _STREAM_ONLY
        return {name for name, _ in _OPTIONS.values()} - other

    def option(self, key: str, value: Any) -> ImageReader:
        name, parse = _OPTIONS.get(key.lower(), ("", str))
        if name not in self._known():
            kind = "readStream.image()" if self._streaming else "read.image()"
            raise ValueError(
                f"{kind}: unknown option {key!r}; the options are "
                f"{', '.join(sorted(self._known()))} (see mmlspark.image.read_images)"
            )
        try:
            self._given[name] = parse(value)
        except ValueError as e:
            raise ValueError(f"option {key!r}: {e}") from None
        return self

    def options(self, **options: Any) -> ImageReader:
        for key, value in options.items():
            self.option(key, value)
        return self

    def load(self, path: str) -> DataFrame:
        """The images under `path`: ``image`` first (Spark's image source layout), then
        ``path`` and ``error``."""
        read = read_image_stream if self._streaming else read_images
        images = read(self._spark, path, **self._given)
        if not files_in_python(self._spark, self._given.get("backend")):
            # Reordered as the JVM reader's own output, so that an ImageTransformer on it still
            # reads each file once, at its scale.
            return _jvm.column_first(self._spark, images, "image")
        return reordered(images, ["image", *[c for c in images.columns if c != "image"]])


def _session(reader: Any) -> SparkSession:
    """The session of a classic or Connect reader."""
    return reader._spark if hasattr(reader, "_spark") else reader._client


def _read_image(self: Any) -> ImageReader:
    return ImageReader(_session(self))


def _read_image_stream(self: Any) -> ImageReader:
    return ImageReader(_session(self), streaming=True)


def _attach() -> None:
    """Adds `image()` to Spark's batch and stream readers, classic and Connect."""
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.streaming.readwriter import DataStreamReader

    readers: list[tuple[type, Any]] = [(DataFrameReader, _read_image)]
    readers.append((DataStreamReader, _read_image_stream))
    try:
        from pyspark.sql.connect.readwriter import DataFrameReader as ConnectReader
        from pyspark.sql.connect.streaming.readwriter import DataStreamReader as ConnectStream
    except ImportError:  # pyspark without the Connect client's dependencies
        pass
    else:
        readers += [(ConnectReader, _read_image), (ConnectStream, _read_image_stream)]
    for cls, method in readers:
        cls.image = method  # type: ignore[attr-defined]


_attach()
