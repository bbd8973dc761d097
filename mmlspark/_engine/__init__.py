"""The engine of the Python backend: the code the Python workers run, with no Spark in it.

Each Python-backend stage is an Arrow UDF (``mapInArrow``) whose tasks run a partition function
of this package on a plan made on the driver (a frozen dataclass: the stage's typed spec, never a
param read by name). The package travels to the workers by value, pickled with the UDF
(``mmlspark.core.arrow_map`` registers it with cloudpickle), so the workers need numpy, pyarrow,
opencv-python and onnxruntime, but not mmlspark: it imports only the standard library, those four
and itself (``tests/test_layers.py`` holds it to that). The driver side, which reads params and
schemas and starts the jobs, lives in the area packages (``mmlspark.opencv._backend``,
``mmlspark.image._backend``, ``mmlspark.onnx._backend``, ``mmlspark.detection._backend``).

The modules, by role:

- ``java``: Java's arithmetic and number formats, where the JVM backend's messages and results
  depend on them;
- ``rows``: row errors, the task's environment, the partition loop and Arrow list arrays;
- ``files``: the executors' limits and settings, local and mounted paths, reading files;
- ``headers``: image headers and EXIF read without decoding;
- ``decode``: decoding encoded images (``ImageCodec``);
- ``structs``: Spark's image struct to and from numpy;
- ``ops``: the image operations (``ImageOp``) and tensors of images;
- ``images``: the partitions of ImageDecoder, ImageTransformer, UnrollImage, UnrollBinaryImage,
  ImageSetAugmenter and taken times;
- ``tensors``: model inputs and outputs, feeding rows as tensors;
- ``ort``: onnxruntime sessions and the partitions of ONNXModel;
- ``yolo``: ObjectDetector's letterbox, model and YOLO decoding;
- ``crops``: CropDetections;
- ``batching``: the mini-batchers (fixed, buffered by time, dynamic with a read-ahead thread).
- ``explain``: the explainers' local fits (Kernel SHAP, LIME's weighted ridge regression).
"""
