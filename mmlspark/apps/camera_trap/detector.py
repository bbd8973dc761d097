"""A YOLO-format ONNX detector (MegaDetector v5 and the like), loaded and checked before
any photo is read, and how photos are decoded and cropped for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from mmlspark.apps.camera_trap.settings import JobError, _first_line
from mmlspark.detection import CropDetections, ObjectDetector
from mmlspark.image import ImageDecoder


@dataclass
class LoadedDetector:
    """A detector file ready to run: the stage (model bytes set, checked), the side photos are
    letterboxed to and the file's name."""

    stage: ObjectDetector
    size: int
    name: str
    path: str

    def decoder(self, scale: int = 1) -> ImageDecoder:
        """Decodes at the smallest JPEG scale that covers `scale` times the letterbox; for crops
        `CROP_DECODE_SCALE`, so that they keep twice the detail the detector saw while a 12-24 MP
        photo is never held whole (a 4000x3000 photo is held at 2000x1500 for a 640 detector)."""
        side = scale * self.size
        return ImageDecoder(minHeight=side, minWidth=side)

    def cropper(self, threshold: float) -> CropDetections:
        """Square crops of the animal detections at or over `threshold`, as MegaDetector's crop
        scripts cut them for species classifiers (every category when no class is 'animal'); a
        photo without any stays as one row."""
        names = self.stage.getClassNames()
        return CropDetections(
            confidenceThreshold=threshold,
            categories=[str(i + 1) for i, name in enumerate(names) if name == "animal"],
            square=True,
            keepUncropped=True,
        )


#: Crops are cut from photos decoded to cover this many times the detector's input side.
CROP_DECODE_SCALE = 2


def load_detector(
    spark: SparkSession,
    detector: str,
    *,
    threshold: float = 0.005,
    image_size: int | None = None,
    class_names: list[str] | None = None,
) -> LoadedDetector:
    """The detector in file `detector`, checked before any photo is read: a model that is no
    YOLO-format detector, or disagrees with `image_size` or `class_names`, is refused."""
    try:
        model_bytes = Path(detector).read_bytes()
    except OSError as e:
        raise JobError(f"cannot read the detector model {detector}: {e}") from None
    stage = ObjectDetector(inputCol="image", confidenceThreshold=threshold)
    if image_size:
        stage.setImageSize(image_size)
    if class_names:
        stage.setClassNames(class_names)
    stage.setModelPayload(model_bytes)
    try:
        stage.transform(spark.createDataFrame([], _READ_SCHEMA))  # checks, runs nothing
    except Exception as e:  # noqa: BLE001 - a model that is no YOLO detector, said once
        raise JobError(f"{detector} is not a detector this job can run: {_first_line(e)}") from None
    if not image_size:
        # The model's fixed input size, else the detector's default.
        shape = next(iter(stage.getModelInputs().values()))["shape"]
        image_size = shape[2] if len(shape) == 4 and shape[2] > 0 else 640
    return LoadedDetector(
        stage.setImageSize(image_size),
        image_size,
        Path(detector).name,
        str(Path(detector).resolve()),
    )


#: The columns read_files gives, for checking a stage before any photo is read.
_READ_SCHEMA = (
    "path string, image struct<origin:string,height:int,width:int,nChannels:int,mode:int,"
    "data:binary>, error string"
)
