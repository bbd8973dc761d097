"""ObjectDetector and CropDetections on the Python backend, driver side: OpenCV and onnxruntime
in an Arrow UDF (``mapInArrow``), no jar.

The stages are checked against the model and the input schema here, before any job, with the JVM
stages' messages (``scala/.../detection``); the tasks run the engine (``mmlspark._engine.yolo``,
``mmlspark._engine.crops``) on the plans made here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

from mmlspark._engine.crops import CropPlan
from mmlspark._engine.crops import partition as crops
from mmlspark._engine.messages import row_message
from mmlspark._engine.ort import model_specs
from mmlspark._engine.yolo import (
    Decoder,
    DetectPlan,
    FileSource,
    Layout,
    detect,
    resolve_layout,
)
from mmlspark.core.checks import fail, require_absent, require_column_type, require_distinct
from mmlspark.core.fused import Step, deferred_of, deferred_over, run_step
from mmlspark.onnx import ONNXModel
from mmlspark.onnx._backend import plan as onnx_plan
from mmlspark.onnx._backend import shipped
from mmlspark.opencv._backend import binary_or_image, image_type, pixel_setting

if TYPE_CHECKING:
    from mmlspark.detection._CropDetections import _CropDetections
    from mmlspark.detection.object_detector import ObjectDetector

DEVICE_TYPES = {"auto": "auto", "cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}
DEFAULT_IMAGE_SIZE = 640
INPUT_DESCRIPTION = (
    "an image struct (origin, height, width, nChannels, mode, data) or encoded image bytes (binary)"
)
DETECTIONS_DESCRIPTION = (
    "an array of detections (category, label, conf, bbox), as ObjectDetector writes them"
)


def detections_type() -> Any:
    """The detections column's type, as the JVM stage's (``Seq[Detection]``)."""
    return T.ArrayType(
        T.StructType(
            [
                T.StructField("category", T.StringType(), True),
                T.StructField("label", T.StringType(), True),
                T.StructField("conf", T.DoubleType(), False),
                T.StructField("bbox", T.ArrayType(T.DoubleType(), False), True),
            ]
        ),
        True,
    )


def is_detections(data_type: Any) -> bool:
    """Whether `data_type` is an array of structs with the fields of a detection
    (``CropDetections.isDetections``)."""
    if not (isinstance(data_type, T.ArrayType) and isinstance(data_type.elementType, T.StructType)):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    wanted: list[tuple[str, Any]] = [
        ("category", T.StringType()),
        ("conf", T.DoubleType()),
        ("bbox", None),  # an array of doubles
    ]
    for name, expected in wanted:
        if name not in fields:
            return False
        actual = fields[name]
        if isinstance(actual, T.ArrayType):
            if expected is not None or actual.elementType != T.DoubleType():
                return False
        elif expected is None or actual != expected:
            return False
    return True


def detector_plan(
    fail: Callable[[str], Any],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    image_size: int | None,
    model_format: str,
    class_names: Sequence[str],
) -> tuple[int, Any, Any, Layout]:
    """The square size, the model input and output and the output's layout, checked as the JVM's
    ``ObjectDetector.plan`` checks them (`fail(message)` raises)."""
    if len(inputs) != 1:
        fail(row_message("detectorInputs", count=len(inputs)))
    spec = inputs[0]
    shape = spec.row_shape
    if len(shape) != 3 or (shape[0] >= 0 and shape[0] != 3):
        fail(row_message("detectorNotImage", input=spec.describe()))
    h, w = shape[1], shape[2]
    if h >= 0 and w >= 0 and h != w:
        fail(row_message("detectorNotSquare", input=spec.describe()))
    fixed = h if h >= 0 else w if w >= 0 else None
    if image_size is not None and fixed is not None and image_size != fixed:
        fail(row_message("detectorSize", size=image_size, fixed=fixed, input=spec.describe()))
    size = image_size if image_size is not None else fixed or DEFAULT_IMAGE_SIZE
    if not outputs:
        fail(row_message("detectorNoOutput"))
    output = outputs[0]
    try:
        layout = resolve_layout(output.row_shape, model_format)
    except ValueError as error:
        fail(row_message("detectorBadOutput", output=output.describe(), error=error))
    if len(class_names) != layout.classes:
        fail(
            row_message(
                "detectorClasses",
                classes=layout.classes,
                output=output.describe(),
                format=layout.format,
                count=len(class_names),
                names=", ".join(class_names),
            )
        )
    return size, spec, output, layout


def transform_detector(stage: ObjectDetector, dataset: Any) -> Any:
    """ObjectDetector's output on the Python backend."""
    schema = dataset.schema
    settings = stage._spec()
    field = require_column_type(
        stage, schema, settings.inputCol, INPUT_DESCRIPTION, binary_or_image
    )
    output_col, error_col = settings.outputCol, settings.errorCol
    require_absent(stage, schema, output_col)
    require_absent(stage, schema, error_col)
    require_distinct(stage, "outputCol and errorCol", [output_col, error_col])
    model = stage._model_bytes()
    inputs, outputs = model_specs(model, stage._model_what())
    size, spec, output, layout = detector_plan(
        lambda message: fail(stage, message),
        inputs,
        outputs,
        settings.imageSize,
        settings.modelFormat,
        list(settings.classNames),
    )
    uid = stage.uid
    tensor, height, width, raw, image_error, model_error = (
        f"__{part}_{uid}"
        for part in ("tensor", "height", "width", "raw", "imageError", "modelError")
    )
    # On read_images' own output the tasks read the files themselves (the JVM's fromFiles).
    d = deferred_of(dataset)
    read = d.read if d is not None and settings.inputCol == "image" else None
    source = dataset if d is None or read is None else d.base
    files = None
    if read is not None:
        r = read.decoding
        files = FileSource(
            r,
            r.scale_for((size, size) if settings.reducedDecode else None),
            read.file_setting,
            read.listing_error_col,
            "error",
        )
    passed = [*source.schema.fields]
    if files is not None:
        passed.append(T.StructField(files.read_error_col, T.StringType(), True))
    device = settings.deviceType.strip().lower()
    batch = settings.miniBatchSize
    onnx = ONNXModel().setBackend("python")
    onnx.setParams(
        feedDict={spec.name: tensor},
        fetchDict={raw: output.name},
        errorCol=model_error,
        miniBatchSize=batch,
        deviceType=DEVICE_TYPES.get(device, device),
    )
    prepared = T.StructType(
        [
            *passed,
            T.StructField(
                tensor,
                T.ArrayType(T.FloatType(), False),
                True,
                {"tensorShape": [3, size, size]},
            ),
            T.StructField(height, T.IntegerType(), True),
            T.StructField(width, T.IntegerType(), True),
            T.StructField(image_error, T.StringType(), True),
        ]
    )
    scoring = shipped(dataset.sparkSession, onnx_plan(onnx, model, prepared))
    plan = DetectPlan(
        input_col=field.name if files is None else "path",
        binary=isinstance(field.dataType, T.BinaryType),
        reduced=settings.reducedDecode,
        size=size,
        setting=pixel_setting(dataset),
        columns=len(passed),
        tensor_col=tensor,
        height_col=height,
        width_col=width,
        image_error_col=image_error,
        raw_col=raw,
        model_error_col=model_error,
        onnx=scoring,
        decoder=Decoder(
            layout,
            settings.confidenceThreshold,
            settings.iouThreshold,
            settings.maxDetections,
            settings.classNames,
        ),
        output_col=output_col,
        error_col=error_col,
        min_rows=scoring.batch,
        files=files,
    )
    added = [
        *passed[len(source.schema.fields) :],
        T.StructField(output_col, detections_type(), True),
        T.StructField(error_col, T.StringType(), True),
    ]
    out = run_step(source, Step(detect, plan), added, lambda out: out)
    if d is None or read is None:
        return out
    return deferred_over(d, out, (output_col, error_col))


def transform_crops(stage: _CropDetections, dataset: Any) -> Any:
    """CropDetections' output on the Python backend."""
    schema = dataset.schema
    settings = stage._spec()
    input_col = settings.inputCol
    field = require_column_type(stage, schema, input_col, INPUT_DESCRIPTION, binary_or_image)
    detections_field = require_column_type(
        stage,
        schema,
        settings.detectionsCol,
        DETECTIONS_DESCRIPTION,
        is_detections,
    )
    kept = T.StructType([f for f in schema.fields if f.name != input_col])
    index_col, detection_col, output_col, error_col = (
        settings.detectionIndexCol,
        settings.detectionCol,
        settings.outputCol,
        settings.errorCol,
    )
    added_names = [index_col, detection_col, output_col, error_col]
    for name in added_names:
        require_absent(stage, kept, name)
    require_distinct(stage, "output columns", added_names)
    plan = CropPlan(
        input_col=input_col,
        detections_col=detections_field.name,
        binary=isinstance(field.dataType, T.BinaryType),
        kept=tuple(i for i, f in enumerate(schema.fields) if f.name != input_col),
        threshold=settings.confidenceThreshold,
        categories=frozenset(settings.categories),
        square=settings.square,
        keep_uncropped=settings.keepUncropped,
        setting=pixel_setting(dataset),
        index_col=index_col,
        detection_col=detection_col,
        output_col=output_col,
        error_col=error_col,
    )
    detections_array = detections_field.dataType
    assert isinstance(detections_array, T.ArrayType)  # is_detections checked it
    added = [
        T.StructField(index_col, T.IntegerType(), True),
        T.StructField(detection_col, detections_array.elementType, True),
        T.StructField(output_col, image_type(), True),
        T.StructField(error_col, T.StringType(), True),
    ]
    return run_step(
        dataset,
        Step(crops, plan),
        added,
        lambda out: out,
        keep=tuple(f.name for f in kept.fields),
    )
