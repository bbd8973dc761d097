"""The image stages on the Python backend, driver side: ImageTransformer, ImageSetAugmenter, and
what the image stages share (Spark's image struct type, their column checks, the plan of a stage,
running it).

The stages' params and schemas are read and checked here, before any job, with the JVM stages'
messages; the tasks run the engine (``mmlspark._engine.images``) on the plan made here, in an
Arrow UDF that may join the UDF of the Python-backend stage before (``mmlspark.core.fused``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.files import MAX_FILE_BYTES_KEY, MAX_PIXELS_KEY, max_pixels
from mmlspark._engine.images import (
    Augmenting,
    Decoding,
    Plan,
    augment_partition,
    files_partition,
    partition,
)
from mmlspark._engine.ops import gray_tensor, parse_ops, reduced_decode_target, tensor_shape
from mmlspark.core.checks import require_absent, require_column_type, require_distinct
from mmlspark.core.fused import Deferred, Step, deferred_of, deferred_over, run_step
from mmlspark.opencv._ImageOps import OPERATIONS
from mmlspark.opencv.functions import image_struct_type

if TYPE_CHECKING:
    from mmlspark.opencv._ImageSetAugmenter import _ImageSetAugmenter
    from mmlspark.opencv._ImageTransformer import _ImageTransformer

IMAGE_DESCRIPTION = "an image struct (origin, height, width, nChannels, mode, data)"
#: The metadata key under which read_images records how it decoded its ``image`` column (the JVM's
#: ``ReadSettings``).
READ_KEY = "imageRead"


class InputSpec(Protocol):
    """The field of a stage's frozen spec that names its input column."""

    @property
    def inputCol(self) -> str: ...


class InputStage(Protocol):
    """A generated stage with an input column: its uid and frozen spec."""

    @property
    def uid(self) -> str: ...
    def _spec(self) -> InputSpec: ...


class ColumnSpec(InputSpec, Protocol):
    """The fields of a row-wise stage's frozen spec that the shared checks and plans read."""

    @property
    def outputCol(self) -> str: ...
    @property
    def errorCol(self) -> str: ...


class RowwiseStage(Protocol):
    """A generated row-wise stage (input, output and error columns): its uid and frozen spec."""

    @property
    def uid(self) -> str: ...
    def _spec(self) -> ColumnSpec: ...


def stage_error(stage: Any, message: str) -> ValueError:
    """The JVM stage's error (the message format of mmlspark.core.checks.fail), to raise."""
    return ValueError(f"{type(stage).__name__} {stage.uid}: {message}")


def image_type() -> T.StructType:
    """Spark's image struct type as the JVM stages write it."""
    return image_struct_type()


def is_image(data_type: Any) -> bool:
    """Whether `data_type` is Spark's image struct."""
    return isinstance(data_type, T.StructType) and [
        (f.name, f.dataType) for f in data_type.fields
    ] == [(f.name, f.dataType) for f in image_type().fields]


def binary_or_image(data_type: Any) -> bool:
    """Whether `data_type` is encoded image bytes or Spark's image struct."""
    return isinstance(data_type, T.BinaryType) or is_image(data_type)


def check_input(
    stage: InputStage, schema: Any, accepts: Callable[[Any], bool], expected: str
) -> Any:
    """The input field of `stage`, checked as the JVM's SchemaUtils.requireColumnType does."""
    return require_column_type(stage, schema, stage._spec().inputCol, expected, accepts)


def check_columns(
    stage: RowwiseStage, schema: Any, accepts: Callable[[Any], bool], expected: str
) -> Any:
    """The checks of the JVM's RowwiseTransformer.transformSchema; the input field."""
    field = check_input(stage, schema, accepts, expected)
    spec = stage._spec()
    out, err = spec.outputCol, spec.errorCol
    require_absent(stage, schema, out)
    require_absent(stage, schema, err)
    require_distinct(stage, "outputCol and errorCol", [out, err])
    return field


def pixel_setting(dataset: Any) -> str | None:
    """The session's ``spark.mmlspark.image.maxPixels``, checked here, before any job."""
    value = dataset.sparkSession.conf.get(MAX_PIXELS_KEY, None)
    if value is not None:
        max_pixels(value)  # a bad setting fails here, before any job
    return value  # type: ignore[no-any-return]


def file_setting(dataset: Any) -> str | None:
    """The session's ``spark.mmlspark.image.maxFileBytes``, unchecked."""
    return dataset.sparkSession.conf.get(MAX_FILE_BYTES_KEY, None)  # type: ignore[no-any-return]


def stage_plan(stage: RowwiseStage, dataset: Any | None, kind: str, **fields: Any) -> Plan:
    """The plan of `stage` with its columns (and the pixel limit set for `dataset`'s session)."""
    spec = stage._spec()
    return Plan(
        kind=kind,
        input_col=spec.inputCol,
        output_col=spec.outputCol,
        error_col=spec.errorCol,
        setting=None if dataset is None else pixel_setting(dataset),
        **fields,
    )


def run(
    dataset: Any,
    plan: Plan,
    output_type: Any,
    metadata: dict[str, Any],
    drop_invalid: bool = False,
) -> Any:
    """`dataset` with the plan's output and error columns, computed in the Python workers."""
    added = [
        T.StructField(plan.output_col, output_type, True),
        T.StructField(plan.error_col, T.StringType(), True),
    ]

    def finish(out: Any) -> Any:
        column = F.col(f"`{plan.output_col}`")
        if plan.kind == "unroll":
            from pyspark.ml.functions import array_to_vector

            column = F.when(column.isNotNull(), array_to_vector(column))
        if metadata or plan.kind == "unroll":
            # withMetadata: Spark Connect's withColumn drops an alias's metadata (4.3)
            out = out.withColumn(plan.output_col, column).withMetadata(plan.output_col, metadata)
        return out.filter(F.col(f"`{plan.output_col}`").isNotNull()) if drop_invalid else out

    return run_step(
        dataset,
        Step(partition, plan),
        added,
        finish,
        ends_chain=plan.kind == "unroll",
        keep=plan.keep,
    )


def read_settings(field: Any) -> Decoding | None:
    """read_images' settings recorded on `field`, when it read the images at full size in a mode
    with reduced JPEG decodes (the JVM's ``ReadSettings.of`` and ``fullSize``)."""
    m: Any = field.metadata.get(READ_KEY) if isinstance(field.metadata, dict) else None
    try:
        d = Decoding(
            str(m["colorMode"]),
            bool(m["applyOrientation"]),
            int(m["reduceFactor"]),
            int(m["minHeight"]),
            int(m["minWidth"]),
        )
    except (TypeError, KeyError, ValueError):
        return None
    return d if d.full_size else None


def transform_images(stage: _ImageTransformer, dataset: Any) -> Any:
    """ImageTransformer's output on the Python backend."""
    spec = stage._spec()
    field = check_columns(
        stage,
        dataset.schema,
        binary_or_image,
        IMAGE_DESCRIPTION + " or encoded image bytes (binary)",
    )
    try:
        ops = tuple(parse_ops(spec.operations, OPERATIONS))
    except ValueError as error:
        raise stage_error(stage, str(error)) from None
    binary = isinstance(field.dataType, T.BinaryType)
    tensor = spec.toTensor
    order = None
    metadata: dict[str, Any] = {}
    if tensor:
        requested = spec.tensorChannelOrder.strip().upper()
        if requested not in ("RGB", "BGR"):
            raise stage_error(stage, f"'{spec.tensorChannelOrder}' is not one of 'RGB', 'BGR'")
        order = "GRAY" if gray_tensor(ops) else requested
        metadata = {"tensorShape": tensor_shape(ops), "tensorChannelOrder": order}
    reduced = spec.reducedDecode
    d = deferred_of(dataset)
    if d is not None and d.read is not None and spec.inputCol == "image":
        return _from_files(stage, dataset, d, ops, order, metadata)
    read = read_settings(field) if reduced and not binary else None
    reread = read if read is not None and reduced_decode_target(ops) else None
    plan = stage_plan(
        stage,
        dataset,
        "transform",
        binary=binary,
        reduced=binary and reduced,
        ops=ops,
        tensor_order=order,
        reread=reread,
        file_setting=file_setting(dataset) if reread else None,
    )
    output_type = T.ArrayType(T.FloatType(), False) if tensor else image_type()
    return run(dataset, plan, output_type, metadata)


def _from_files(
    stage: _ImageTransformer,
    dataset: Any,
    d: Deferred,
    ops: tuple[Any, ...],
    order: str | None,
    metadata: dict[str, Any],
) -> Any:
    """ImageTransformer on ``read_images``' own output, `d`: each task reads the file at ``path``
    and decodes it once, at the first resize's scale where ``reducedDecode`` allows (as ``reread``
    does) or as the read decodes it, straight into the operations. ``error`` is the read's error,
    from the same pass; ``image`` stays deferred, computed only where read (the JVM's
    ``ImageTransformer.fromFiles``)."""
    read = d.read
    assert read is not None
    r = read.decoding
    scale = r.scale_for(reduced_decode_target(ops) if stage._spec().reducedDecode else None)
    plan = replace(
        stage_plan(
            stage,
            dataset,
            "transform",
            binary=False,
            ops=ops,
            tensor_order=order,
            read_path=True,
            reread=r,
            scale=scale,
            file_setting=read.file_setting,
            prior_error_col=read.listing_error_col,
            read_error_col="error",
        ),
        input_col="path",
    )
    output_type = T.ArrayType(T.FloatType(), False) if order is not None else image_type()
    added = [
        T.StructField("error", T.StringType(), True),
        T.StructField(plan.output_col, output_type, True),
        T.StructField(plan.error_col, T.StringType(), True),
    ]

    def finish(out: Any) -> Any:
        if not metadata:
            return out
        column = F.col(f"`{plan.output_col}`")
        return out.withColumn(plan.output_col, column).withMetadata(plan.output_col, metadata)

    base = run_step(d.base, Step(files_partition, plan), added, finish)
    return deferred_over(d, base, (plan.output_col, plan.error_col))


#: OpenCV's flip codes: around the vertical axis (left-right), around the horizontal (up-down).
_FLIP_LEFT_RIGHT, _FLIP_UP_DOWN = 1, 0


def transform_augment(stage: _ImageSetAugmenter, dataset: Any) -> Any:
    """ImageSetAugmenter's output on the Python backend: each row repeated with the image, then
    its left-right, then its up-down mirror (as set), one row with a null image for a null or
    malformed one; the rows in their order, the input's columns unchanged."""
    spec = stage._spec()
    out = spec.outputCol
    check_input(stage, dataset.schema, is_image, IMAGE_DESCRIPTION)
    require_absent(stage, dataset.schema, out)
    chosen = [(_FLIP_LEFT_RIGHT, spec.flipLeftRight), (_FLIP_UP_DOWN, spec.flipUpDown)]
    flips = tuple(code for code, wanted in chosen if wanted)
    images = f"__augmented_{stage.uid}"
    plan = Augmenting(spec.inputCol, images, flips)
    added = [T.StructField(images, T.ArrayType(image_type(), True), True)]

    def finish(df: Any) -> Any:
        # explode_outer keeps each row's images in order, and gives one row with a null image
        # where there are none
        return df.withColumn(out, F.explode_outer(F.col(f"`{images}`"))).drop(images)

    return run_step(dataset, Step(augment_partition, plan), added, finish, ends_chain=True)
