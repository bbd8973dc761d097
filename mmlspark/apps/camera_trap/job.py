"""The camera-trap classification job: train, classify, evaluate, and the demo that runs all three.

Training reads photos labelled by sub-folder or by a COCO Camera Traps (CCT) JSON, and fits
``ImageFeaturizer`` (an ONNX model cut at a feature node) followed by a logistic regression over
the sorted class names (``IndexToString`` turns its index back into a name); the fitted pipeline,
model bytes included, is saved as one directory that either backend loads.

The job runs on either backend: with the jar (classic sessions, Connect servers that have it),
and without it on the Python backend (``--backend python``, or any session that cannot load the
jar), where files are listed by Spark's ``binaryFile`` source and read, decoded and scored by the
Python workers, and the charts are drawn on the driver with opencv-python.
Classifying scores photos and writes predictions as Parquet and CSV plus a MegaDetector-format
results JSON; it resumes an interrupted run. Evaluating compares predictions with ground truth.

The code lives in modules of this package by role, and every name callers use is re-exported here:
``settings`` (constants, ``JobError``, ``ClassifySettings``, the committed tables' schemas),
``session``, ``labels`` (CCT ground truth), ``training`` (``train``), ``detector``,
``predictions`` (what a model says per photo), ``scoring`` (``classify``, ``detect``),
``run_loop`` (the resumable run, ``finish``), ``results`` (the results folder), ``bursts``,
``outputs`` (CSV and MegaDetector JSON), ``evaluation`` (``evaluate``), ``demo`` and
``camtrap_dp`` (``export``: a Camtrap DP data package of a run's results) and ``explain``
(heatmaps of where a model looked; ``explain_crops`` for models trained on detection crops).
"""

from __future__ import annotations

from mmlspark.apps.camera_trap.bursts import with_bursts
from mmlspark.apps.camera_trap.camtrap_dp import export
from mmlspark.apps.camera_trap.demo import DEMO_DATA, DemoFiles, demo, demo_detection
from mmlspark.apps.camera_trap.detector import CROP_DECODE_SCALE, LoadedDetector, load_detector
from mmlspark.apps.camera_trap.evaluation import (
    EVALUATION_FILES,
    box_iou,
    class_metrics,
    draw_plots,
    evaluate,
    evaluate_detections,
)
from mmlspark.apps.camera_trap.explain import explain
from mmlspark.apps.camera_trap.labels import CctLabels, with_labels
from mmlspark.apps.camera_trap.outputs import (
    FORMAT_VERSION,
    megadetector_entry,
    write_detections,
    write_outputs,
)
from mmlspark.apps.camera_trap.predictions import (
    classified,
    featurizer_size,
    score,
    score_two_stage,
)
from mmlspark.apps.camera_trap.results import (
    _model_identity,
    begin,
    check_folders,
    committed,
    current,
    open_folder,
)
from mmlspark.apps.camera_trap.run_loop import ROWS_PER_FILE, VANISHED_RUNS, Interrupted, finish
from mmlspark.apps.camera_trap.scoring import classify, detect
from mmlspark.apps.camera_trap.session import _qualified, spark_session
from mmlspark.apps.camera_trap.settings import (
    DETECT_SCHEMA,
    EMPTY,
    LABEL_INDEX,
    PREDICTION_INDEX,
    SCHEMA,
    TOP_K,
    TOP_K_TYPE,
    TWO_STAGE_SCHEMA,
    ClassifySettings,
    JobError,
    Log,
)
from mmlspark.apps.camera_trap.training import check_model_folder, train

__all__ = [
    "CROP_DECODE_SCALE",
    "CctLabels",
    "ClassifySettings",
    "DEMO_DATA",
    "DETECT_SCHEMA",
    "DemoFiles",
    "EMPTY",
    "EVALUATION_FILES",
    "FORMAT_VERSION",
    "Interrupted",
    "JobError",
    "LABEL_INDEX",
    "LoadedDetector",
    "Log",
    "PREDICTION_INDEX",
    "ROWS_PER_FILE",
    "SCHEMA",
    "TOP_K",
    "TOP_K_TYPE",
    "TWO_STAGE_SCHEMA",
    "VANISHED_RUNS",
    "_model_identity",
    "_qualified",
    "begin",
    "box_iou",
    "check_folders",
    "check_model_folder",
    "class_metrics",
    "classified",
    "classify",
    "committed",
    "current",
    "demo",
    "demo_detection",
    "detect",
    "draw_plots",
    "evaluate",
    "evaluate_detections",
    "explain",
    "export",
    "featurizer_size",
    "finish",
    "load_detector",
    "megadetector_entry",
    "open_folder",
    "score",
    "score_two_stage",
    "spark_session",
    "train",
    "with_bursts",
    "with_labels",
    "write_detections",
    "write_outputs",
]
