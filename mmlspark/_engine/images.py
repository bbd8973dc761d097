"""The partitions of the image stages: ImageDecoder (and ``read_files``), ImageTransformer,
UnrollImage and UnrollBinaryImage read an input column (encoded bytes, file paths or image
structs) and add their output and error columns, one value per row, as the JVM stages do;
ImageSetAugmenter adds each image's flips; and the EXIF times of a listing's photos (the JVM's
``TakenTimes``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmlspark._engine.decode import decode
from mmlspark._engine.files import HEAD_BYTES, max_file_bytes, max_pixels, read_file
from mmlspark._engine.headers import exif_seconds
from mmlspark._engine.messages import row_message
from mmlspark._engine.ops import Image, Op, reduced_decode_target, run_ops, to_chw
from mmlspark._engine.rows import RowError, Task, computed, describe, list_array
from mmlspark._engine.structs import from_struct, image_array, order_of, to_struct, unroll


@dataclass(frozen=True)
class Decoding:
    """How an image is decoded: ImageDecoder's settings (and read_images')."""

    mode: str
    orientation: bool
    reduce: int
    min_h: int
    min_w: int

    @property
    def full_size(self) -> bool:
        """Whether this decode is at full size in a mode with reduced JPEG decodes (the JVM's
        ``ReadSettings.fullSize``): a stage resizing after it may decode smaller."""
        return self.reduce == 1 and self.min_h == 0 and self.min_w == 0 and self.mode != "unchanged"

    def scale_for(self, target: tuple[int, int] | None) -> tuple[int, int, int]:
        """(reduce, min height, min width) for a stage that reads this decode's files again:
        the smallest JPEG scale covering `target` (height, width) where this decode is at full
        size, else this decode's own (the JVM's ``ReadSettings.scaleFor``)."""
        if target is not None and self.full_size:
            return (1, *target)
        return (self.reduce, self.min_h, self.min_w)


@dataclass(frozen=True)
class Plan:
    """What the tasks run: read `input_col` (binary or image struct), compute one value per row
    with `kind` ("decode", "transform", "unroll"), add `output_col` and `error_col`."""

    kind: str
    input_col: str
    binary: bool
    output_col: str
    error_col: str
    setting: str | None
    origin_col: str | None = None
    decoding: Decoding | None = None  # ImageDecoder's settings
    reduced: bool = False  # ImageTransformer on bytes: decode at the first resize's scale
    ops: tuple[Op, ...] = ()
    tensor_order: str | None = None  # set: tensor output in this channel order
    keep: tuple[str, ...] | None = None  # the input columns passed on (default: all)
    read_path: bool = False  # `input_col` names files to read (read_files), not their bytes
    file_setting: str | None = None  # spark.mmlspark.image.maxFileBytes, with read_path
    prior_error_col: str | None = None  # a row with an error here keeps it and is not read
    reread: Decoding | None = None  # transform: read_images' settings; decode each image's
    # origin again, at the first resize's scale
    resize: tuple[int, int] | None = None  # unroll of encoded bytes: (height, width) to resize to
    scale: tuple[int, int, int] | None = (
        None  # files_partition: (reduce, min_h, min_w) to decode at
    )
    read_error_col: str | None = None  # files_partition: the column of the read's own error


def _row_function(plan: Plan, limit: int) -> Callable[[Any, Any], Any]:
    """The function of one row: (input value, origin) -> the output value."""
    if plan.kind == "decode":
        d = plan.decoding
        assert d is not None
        file_limit = max_file_bytes(plan.file_setting) if plan.read_path else 0

        def decoded(data: Any, origin: Any) -> Any:
            if plan.read_path:
                if data is None:
                    raise RowError("no path (null)")
                data = read_file(data, file_limit)
            pixels = decode(data, d.mode, d.orientation, d.reduce, d.min_h, d.min_w, limit)
            return to_struct(pixels, origin)

        return decoded
    if plan.kind == "unroll" and plan.binary:
        return _unroll_encoded(plan, limit)
    if plan.kind == "unroll":
        return lambda row, _: unroll(from_struct(row))
    ops, order = plan.ops, plan.tensor_order
    target = reduced_decode_target(ops) if plan.reduced or plan.reread else None
    file_limit = max_file_bytes(plan.file_setting) if plan.reread else 0

    def transformed(value: Any, _: Any) -> Any:
        if plan.reread is not None:
            if value is None:
                raise RowError(row_message("noImage"))
            origin = value["origin"]
            r, (min_h, min_w) = plan.reread, target or (0, 0)
            data = read_file(origin, file_limit)
            first = decode(data, r.mode, r.orientation, 1, min_h, min_w, limit)
        elif plan.binary:
            if value is None:
                raise RowError(row_message("noImage"))
            min_h, min_w = target or (0, 0)
            first = decode(value, "color", True, 1, min_h, min_w, limit)
            origin = None
        else:
            first = from_struct(value)
            origin = value["origin"]
        out = run_ops(ops, Image(first, order_of(first)), limit)
        return to_chw(out, order) if order is not None else to_struct(out.pixels, origin)

    return transformed


def _unroll_encoded(plan: Plan, limit: int) -> Callable[[Any, Any], Any]:
    """UnrollBinaryImage's row: decoded with the plan's settings, resized (bilinear, as the
    JVM's ``Imgproc.resize``) when it has a size, then unrolled."""
    import cv2

    d, size = plan.decoding, plan.resize
    assert d is not None

    def unrolled(data: Any, _: Any) -> Any:
        pixels = decode(data, d.mode, d.orientation, d.reduce, d.min_h, d.min_w, limit)
        if size is not None:
            pixels = cv2.resize(pixels, (size[1], size[0]))
        return unroll(pixels)

    return unrolled


def _output_array(plan: Plan, values: list[Any]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    if plan.kind == "unroll" or plan.tensor_order is not None:
        return list_array(values, pa.float64() if plan.kind == "unroll" else pa.float32())
    return image_array(values)


def _output_batch(plan: Plan, rows: Any, values: list[Any], errors: list[str | None]) -> Any:
    """`rows` (the kept columns) with the stage's two columns."""
    import pyarrow as pa

    kept = [i for i, n in enumerate(rows.schema.names) if plan.keep is None or n in plan.keep]
    arrays = [rows.column(i) for i in kept] + [
        _output_array(plan, values),
        pa.array(errors, pa.string()),
    ]
    names = [rows.schema.names[i] for i in kept] + [plan.output_col, plan.error_col]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _size(value: Any) -> int:
    return int(value.nbytes) if isinstance(value, np.ndarray) else len(value[5])


def partition(plan: Plan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """The rows of `batches` with the stage's columns, in output batches bounded in rows and
    bytes (``rows.computed``)."""
    compute = _row_function(plan, max_pixels(plan.setting))

    def inputs(part: Any) -> Iterator[tuple[tuple[Any, Any], str | None]]:
        nulls = [None] * part.num_rows
        values = part.column(plan.input_col).to_pylist()
        origins = part.column(plan.origin_col).to_pylist() if plan.origin_col else nulls
        priors = part.column(plan.prior_error_col).to_pylist() if plan.prior_error_col else nulls
        for value, origin, prior in zip(values, origins, priors, strict=True):
            yield (value, origin), prior

    for rows, values, errors in computed(batches, inputs, compute, _size):
        yield _output_batch(plan, rows, values, errors)


def file_decoder(
    read: Decoding, scale: tuple[int, int, int], file_setting: str | None, limit: int
) -> Callable[[Any, Any], np.ndarray]:
    """(path, the listing's error) -> the pixels of ``read_images``' file, read and decoded once
    at `scale` (reduce, min height, min width) after the checks of a decode with the read's
    settings `read`: a file the read refuses is refused with its reason, raised."""
    as_read = (read.reduce, read.min_h, read.min_w)
    file_limit = max_file_bytes(file_setting)

    def decoded(path: Any, listing_error: Any) -> np.ndarray:
        if listing_error is not None:
            raise RowError(listing_error)
        if path is None:
            raise RowError("no path (null)")
        data = read_file(path, file_limit)
        return decode(data, read.mode, read.orientation, *scale, limit, read_as=as_read)

    return decoded


def _from_file(plan: Plan, limit: int) -> Callable[[Any, Any], tuple[Any, Any, Any]]:
    """ImageTransformer's row on ``read_images``' own output: (path, the listing's error) ->
    (output, error, the read's error). The file is read and decoded once (``file_decoder``); a
    file that cannot be read gives the transformer a missing image (the JVM's
    ``ImageTransformer.fileUdf``)."""
    assert plan.reread is not None and plan.scale is not None
    decoded = file_decoder(plan.reread, plan.scale, plan.file_setting, limit)
    ops, order = plan.ops, plan.tensor_order

    def from_file(path: Any, listing_error: Any) -> tuple[Any, Any, Any]:
        try:
            first = decoded(path, listing_error)
        except Exception as error:  # noqa: BLE001 (the read's error, as the read gives it)
            return None, row_message("noImage"), describe(error)
        try:
            out = run_ops(ops, Image(first, order_of(first)), limit)
            value = to_chw(out, order) if order is not None else to_struct(out.pixels, path)
        except Exception as error:  # noqa: BLE001 (the transformer's error)
            return None, describe(error), None
        return value, None, None

    return from_file


def files_partition(plan: Plan, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """ImageTransformer on ``read_images``' own output: the rows of its listing (``path`` and the
    listing's error in `plan.prior_error_col`) with the read's error (`plan.read_error_col`), the
    output and the transformer's error, each file read and decoded once (``_from_file``)."""
    import pyarrow as pa

    from_file = _from_file(plan, max_pixels(plan.setting))
    assert plan.prior_error_col is not None and plan.read_error_col is not None

    def inputs(part: Any) -> Iterator[tuple[tuple[Any, Any], None]]:
        paths = part.column(plan.input_col).to_pylist()
        listed = part.column(plan.prior_error_col).to_pylist()
        for path, listing_error in zip(paths, listed, strict=True):
            yield (path, listing_error), None

    def size(result: tuple[Any, Any, Any]) -> int:
        return 0 if result[0] is None else _size(result[0])

    for rows, results, _ in computed(batches, inputs, from_file, size):
        values, errors, read_errors = zip(*results, strict=True) if results else ((), (), ())
        arrays = [
            *rows.columns,
            pa.array(read_errors, pa.string()),
            _output_array(plan, list(values)),
            pa.array(errors, pa.string()),
        ]
        names = [*rows.schema.names, plan.read_error_col, plan.output_col, plan.error_col]
        yield pa.RecordBatch.from_arrays(arrays, names=names)


class FileReader:
    """``read_images``' read of one file, as a row function for a Python UDF: (path, the
    listing's error) -> (image struct or None, error or None). Its pixel limit is made in the
    worker that calls it, from that worker's memory."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.compute: Callable[[Any, Any], Any] | None = None

    def __call__(self, path: Any, listing_error: Any) -> tuple[Any, Any]:
        if listing_error is not None:
            return None, listing_error
        if self.compute is None:
            self.compute = _row_function(self.plan, max_pixels(self.plan.setting))
        try:
            return self.compute(path, path), None
        except Exception as error:  # noqa: BLE001 (a file that cannot be read keeps its reason)
            return None, describe(error)


@dataclass(frozen=True)
class Augmenting:
    """ImageSetAugmenter's work: each image of `input_col` and its flips (OpenCV flip codes, in
    order) into the list column `output_col`."""

    input_col: str
    output_col: str
    flips: tuple[int, ...]


def _augmented(flips: tuple[int, ...], value: Any) -> list[tuple[Any, ...]]:
    """The image and its flips as image structs, its origin kept; none for a null or malformed
    image (which the stage turns into one row with a null image, as the JVM does)."""
    import cv2

    if value is None:
        return []
    try:
        pixels = from_struct(value)
    except RowError:
        return []
    origin = value["origin"]
    return [to_struct(pixels, origin)] + [to_struct(cv2.flip(pixels, c), origin) for c in flips]


def augment_partition(plan: Augmenting, batches: Iterator[Any], task: Task) -> Iterator[Any]:
    """The rows of `batches` with the list of each one's images (``_augmented``), in output
    batches bounded in rows and bytes (``rows.computed``)."""
    import pyarrow as pa

    def inputs(part: Any) -> Iterator[tuple[tuple[Any, ...], str | None]]:
        for value in part.column(plan.input_col).to_pylist():
            yield (plan.flips, value), None

    def size(images: list[tuple[Any, ...]]) -> int:
        return sum(len(image[5]) for image in images)

    for rows, values, _ in computed(batches, inputs, _augmented, size):
        images = [v or [] for v in values]
        offsets = np.zeros(len(images) + 1, dtype=np.int32)
        np.cumsum([len(v) for v in images], out=offsets[1:])
        flat = image_array([image for v in images for image in v])
        lists = pa.ListArray.from_arrays(pa.array(offsets), flat)
        yield pa.RecordBatch.from_arrays(
            [*rows.columns, lists], names=[*rows.schema.names, plan.output_col]
        )


def taken_partition(out_col: str, batches: Iterator[Any]) -> Iterator[Any]:
    """The rows of a listing (``path``) with `out_col`: each photo's EXIF DateTimeOriginal in
    seconds, read from the first HEAD_BYTES of its file (null: not a JPEG, none, unreadable)."""
    import pyarrow as pa

    for batch in batches:
        seconds: list[float | None] = []
        for path in batch.column("path").to_pylist():
            try:
                seconds.append(
                    None if path is None else exif_seconds(read_file(path, 0, HEAD_BYTES))
                )
            except RowError:
                seconds.append(None)
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(seconds, pa.float64())], names=[*batch.schema.names, out_col]
        )
