"""The JVM helpers of the image area (not stages), with named, typed arguments: the only Python
code that names their JVM classes."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from mmlspark.core.jvm import classic_jvm, jvm_class

_FILE_LISTING = "mmlspark.image.FileListing"
_IMAGE_READER = "mmlspark.image.ImageReader"
_DEFERRED = "mmlspark.contracts.DeferredColumns"


def list_files(
    spark: SparkSession, *, path: str, recursive: bool, path_glob_filter: str | None
) -> DataFrame:
    """``FileListing.listDataFrame``: the listing of ``path``, made on the driver."""
    jvm = classic_jvm(
        spark,
        feature="list_files",
        instead="use read_images, or Spark's binaryFile source with ImageDecoder",
    )
    listing = jvm_class(jvm, _FILE_LISTING)
    return DataFrame(
        listing.listDataFrame(spark._jsparkSession, path, recursive, path_glob_filter), spark
    )


def read_files(files: DataFrame, *, decoder: Any) -> DataFrame:
    """``ImageReader.readFiles``: reads and decodes the files of a listing with the settings of
    ``decoder`` (an ImageDecoder)."""
    spark = files.sparkSession
    jvm = classic_jvm(
        spark,
        feature="read_files",
        instead="use read_images, or ImageDecoder on binaryFile rows",
    )
    if decoder._on_python():  # the reader runs on the JVM: it takes the decoder's JVM twin
        decoder = decoder.copy().setBackend("jvm")
    decoder._transfer_params_to_java()
    reader = jvm_class(jvm, _IMAGE_READER)
    return DataFrame(reader.readFiles(files._jdf, decoder._java_obj), spark)


def read_images(
    spark: SparkSession,
    *,
    path: str,
    recursive: bool,
    path_glob_filter: str | None,
    sample_ratio: float,
    seed: int,
    decoder: Any,
) -> DataFrame:
    """``ImageReader.read``: lists ``path`` on the driver, then reads and decodes its files in the
    tasks with ``decoder``'s settings."""
    jvm = classic_jvm(spark, feature="read_images", instead="use read_images over Connect")
    get = decoder.getOrDefault
    reader = jvm_class(jvm, _IMAGE_READER)
    return DataFrame(
        reader.read(
            spark._jsparkSession,
            path,
            recursive,
            path_glob_filter,
            float(sample_ratio),
            int(seed),
            get("colorMode"),
            bool(get("applyOrientation")),
            int(get("reduceFactor")),
            bool(get("dropInvalid")),
            int(get("minHeight")),
            int(get("minWidth")),
        ),
        spark,
    )


def column_first(spark: SparkSession, df: DataFrame, first: str) -> DataFrame:
    """`df` with the column `first` moved first, still the reader's (or a stage's) own output to
    the stages that read its files themselves (``DeferredColumns.reordered``): an
    ``ImageTransformer`` on ``read_images``' output reordered this way still decodes each file
    once, at the scale it needs."""
    jvm = classic_jvm(spark, feature="column_first", instead="select the columns")
    order = [first, *[c for c in df.columns if c != first]]
    return DataFrame(jvm_class(jvm, _DEFERRED).reordered(df._jdf, order), spark)
