"""ImageDecoder, ``read_files``, UnrollImage, UnrollBinaryImage and EXIF times on the Python
backend, driver side: the params and schemas are checked here, with the JVM stages' messages, and
the tasks run the engine (``mmlspark._engine.images``) on the plan made here (see
``mmlspark.opencv._backend``, which also has ImageSetAugmenter)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.decode import COLOR_MODES
from mmlspark._engine.files import max_file_bytes
from mmlspark._engine.images import (
    Decoding,
    FileReader,
    Plan,
    taken_partition,
)
from mmlspark._engine.video import Sampling, frames_partition
from mmlspark.core.arrow_map import map_in_arrow, python_udf
from mmlspark.core.checks import require, require_absent, require_column_type, require_distinct
from mmlspark.core.fused import Deferred, FileRead, defer
from mmlspark.opencv._backend import (
    IMAGE_DESCRIPTION,
    READ_KEY,
    check_columns,
    check_input,
    file_setting,
    image_type,
    is_image,
    pixel_setting,
    run,
    stage_error,
    stage_plan,
)

if TYPE_CHECKING:
    from mmlspark.image._ImageDecoder import _ImageDecoder
    from mmlspark.image._UnrollBinaryImage import _UnrollBinaryImage
    from mmlspark.image._UnrollImage import _UnrollImage


def _is_string(data_type: Any) -> bool:
    return isinstance(data_type, T.StringType)


class DecodingSpec(Protocol):
    """The fields of a decoding stage's frozen spec (ImageDecoder's, UnrollBinaryImage's)."""

    @property
    def colorMode(self) -> str: ...
    @property
    def applyOrientation(self) -> bool: ...
    @property
    def reduceFactor(self) -> int: ...
    @property
    def minHeight(self) -> int: ...
    @property
    def minWidth(self) -> int: ...


class DecodingStage(Protocol):
    @property
    def uid(self) -> str: ...
    def _spec(self) -> DecodingSpec: ...


def decoding(decoder: DecodingStage) -> Decoding:
    """A decoding stage's settings, checked as the JVM stage checks them."""
    spec = decoder._spec()
    mode, reduce = spec.colorMode, spec.reduceFactor
    if mode not in COLOR_MODES:
        raise stage_error(
            decoder, f"colorMode must be one of {', '.join(COLOR_MODES)} but was '{mode}'"
        )
    if reduce not in (1, 2, 4, 8):
        raise stage_error(decoder, f"reduceFactor must be 1, 2, 4 or 8 but was {reduce}")
    return Decoding(mode, spec.applyOrientation, reduce, spec.minHeight, spec.minWidth)


def read_metadata(decoder: _ImageDecoder) -> dict[str, Any]:
    """The metadata of read_images' ``image`` column, read with `decoder`'s settings."""
    d = decoding(decoder)
    settings = {
        "colorMode": d.mode,
        "applyOrientation": d.orientation,
        "reduceFactor": d.reduce,
        "minHeight": d.min_h,
        "minWidth": d.min_w,
    }
    return {READ_KEY: settings}


def transform_decoder(
    stage: _ImageDecoder,
    dataset: Any,
    keep: tuple[str, ...] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """ImageDecoder's output on the Python backend (with only the input columns `keep`, when
    given, before its own)."""
    check_columns(stage, dataset.schema, lambda t: isinstance(t, T.BinaryType), "binary")
    spec = stage._spec()
    origin = spec.originCol
    if origin:
        require_column_type(stage, dataset.schema, origin, "string", _is_string)
    plan = stage_plan(
        stage,
        dataset,
        "decode",
        binary=True,
        origin_col=origin or None,
        decoding=decoding(stage),
        keep=keep,
    )
    return run(dataset, plan, image_type(), metadata or {}, spec.dropInvalid)


def read_files(
    decoder: _ImageDecoder,
    files: Any,
    keep: tuple[str, ...] | None = None,
    metadata: dict[str, Any] | None = None,
    deferred: bool = False,
) -> Any:
    """``read_files`` on the Python backend: the files of a listing (``path``, ``error``, ...)
    read in the tasks from local and mounted paths and decoded with `decoder`'s settings; the
    listing's columns but ``error``, then ``image`` and ``error`` (the listing's, the read's or
    the decode's), as the JVM's ``ImageReader.readFiles`` gives them (with `keep`, only those of
    the listing's columns). `deferred` (``read_images``' own read, without ``dropInvalid``): the
    result is recorded with its listing (``mmlspark.core.fused.Deferred``), so that an
    ImageTransformer on it reads the files itself and ``image`` is computed only where read."""
    for name in ("path", "error"):
        require_column_type(decoder, files.schema, name, "string", _is_string)
    prior = f"__listing_error_{decoder.uid}"
    kept = tuple(c for c in files.columns if c != "error" and (keep is None or c in keep))
    plan = Plan(
        kind="decode",
        input_col="path",
        binary=True,
        output_col="image",
        error_col="error",
        setting=pixel_setting(files),
        origin_col="path",
        decoding=decoding(decoder),
        keep=kept,
        read_path=True,
        file_setting=file_setting(files),
        prior_error_col=prior,
    )
    if plan.file_setting is not None:
        max_file_bytes(plan.file_setting)  # a bad setting fails here, before any job
    listing = files.withColumnRenamed("error", prior)
    drop_invalid = decoder._spec().dropInvalid
    out = run(listing, plan, image_type(), metadata or {}, drop_invalid)
    if not deferred or drop_invalid:
        return out
    base = listing.select(*kept, prior)
    restore = functools.partial(_restored, plan, metadata or {})
    image = functools.partial(_restored, plan, metadata or {}, with_error=False)
    read = FileRead(plan.decoding, prior, plan.file_setting, image)
    return defer(
        out, Deferred(base, frozenset({"image", "error"}), restore, tuple(out.columns), read)
    )


def _restored(plan: Plan, metadata: dict[str, Any], df: Any, with_error: bool = True) -> Any:
    """`df` (over the listing's ``path`` and its errors) with read_images' ``image`` (and, with
    `with_error`, ``error``), from a Python UDF that reads and decodes each file: computed only
    where a query reads them."""
    assert plan.prior_error_col is not None
    result = T.StructType(
        [T.StructField("image", image_type(), True), T.StructField("error", T.StringType(), True)]
    )
    udf = python_udf(df.sparkSession, FileReader(plan), result)
    tmp = f"__read_{plan.prior_error_col}"
    out = df.withColumn(tmp, udf(F.col("path"), F.col(f"`{plan.prior_error_col}`")))
    out = out.withColumn("image", F.col(f"`{tmp}`.image")).withMetadata("image", metadata)
    if with_error:
        out = out.withColumn("error", F.col(f"`{tmp}`.error"))
    return out.drop(tmp)


def taken_times(files: Any, out_col: str) -> Any:
    """`files` (a listing with ``path``) with `out_col`: each photo's EXIF DateTimeOriginal in
    seconds (null: not a JPEG, none, unreadable), read from the first 128 KiB of each file by the
    Python workers (the JVM's ``TakenTimes.add``)."""
    schema = T.StructType([*files.schema.fields, T.StructField(out_col, T.DoubleType(), True)])
    return map_in_arrow(files, functools.partial(taken_partition, out_col), schema)


def video_frames(files: Any, sampling: Sampling) -> Any:
    """``read_video_frames`` in the Python workers (on every session and backend): the listing's
    columns but ``error``, then the frame columns, ``image`` and ``error`` (see
    ``mmlspark._engine.video.frames_partition``)."""
    for name in ("path", "error"):
        if name not in files.columns:
            raise ValueError(f"read_video_frames: the listing has no '{name}' column")
    keep = tuple(c for c in files.columns if c != "error")
    added = [
        T.StructField("frame_number", T.IntegerType(), True),
        T.StructField("frame_time", T.DoubleType(), True),
        T.StructField("frame_rate", T.DoubleType(), True),
        T.StructField("image", image_type(), True),
        T.StructField("error", T.StringType(), True),
    ]
    schema = T.StructType([*[files.schema[c] for c in keep], *added])
    return map_in_arrow(files, functools.partial(frames_partition, sampling, keep), schema)


def transform_unroll(stage: _UnrollImage, dataset: Any) -> Any:
    """UnrollImage's output on the Python backend."""
    check_columns(stage, dataset.schema, is_image, IMAGE_DESCRIPTION)
    plan = stage_plan(stage, None, "unroll", binary=False)
    return run(dataset, plan, T.ArrayType(T.DoubleType(), False), {})


def transform_unroll_binary(stage: _UnrollBinaryImage, dataset: Any) -> Any:
    """UnrollBinaryImage's output on the Python backend: the checks of the JVM's
    ``RowwiseTransformer`` (with the stage's own between the input's and the outputs'), then
    each row decoded, resized and unrolled in the Python workers."""
    check_input(stage, dataset.schema, lambda t: isinstance(t, T.BinaryType), "binary")
    spec = stage._spec()
    height, width = spec.height, spec.width
    require(
        stage, (height == 0) == (width == 0), "height and width must both be 0 or both be positive"
    )
    out, err = spec.outputCol, spec.errorCol
    require_absent(stage, dataset.schema, out)
    require_absent(stage, dataset.schema, err)
    require_distinct(stage, "outputCol and errorCol", [out, err])
    plan = stage_plan(
        stage,
        dataset,
        "unroll",
        binary=True,
        decoding=decoding(stage),
        resize=(height, width) if height else None,
    )
    return run(dataset, plan, T.ArrayType(T.DoubleType(), False), {})
