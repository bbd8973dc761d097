"""ObjectDetector with the model's bytes and introspection, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from mmlspark.detection._ObjectDetector import _ObjectDetector
from mmlspark.onnx.model_payload import HasModelPayload


class ObjectDetector(HasModelPayload, _ObjectDetector):
    """Finds animals, people and vehicles (or any classes) in images with a YOLO-family ONNX
    detector: MegaDetector v5 (YOLOv5 layout) and the YOLOv8 layout of newer Ultralytics exports.

    Each image is letterboxed to ``imageSize`` (from the model when unset), run through the
    model, and its boxes decoded, thresholded and suppressed per class. The ``detections``
    column holds, per image, an array of structs as MegaDetector writes them: ``category``
    (``"1"``, ``"2"``, ... as strings), ``label``, ``conf`` and ``bbox`` = ``[x_min, y_min,
    width, height]`` as fractions of the image. An image with nothing over
    ``confidenceThreshold`` gets an empty array; one that cannot be read gets null and the
    reason in ``errorCol``. It runs on the JVM (the mmlspark jar) or, where no jar can be
    loaded, on the Python backend (opencv-python and onnxruntime in Arrow UDFs), with the same
    results, errors and saved format.

    Examples
    --------
    >>> from mmlspark.image import read_images
    >>> detector = ObjectDetector(modelLocation="/models/md_v5a.onnx", imageSize=1280,
    ...                           confidenceThreshold=0.2)  # doctest: +SKIP
    >>> detector.transform(read_images(spark, "/data/survey")).select(
    ...     "origin", "detections").show()  # doctest: +SKIP
    """

    __doc__ = __doc__ + "\n" + (_ObjectDetector.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        """Letterbox, the model and YOLO's decoding in one Arrow UDF (mmlspark._engine.yolo)."""
        from mmlspark.detection import _backend

        return _backend.transform_detector(self, dataset)
