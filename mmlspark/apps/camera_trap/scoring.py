"""The scoring commands, `classify` and `detect`: what each computes per photo and which
files it writes, run by the resumable loop of `run_loop`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.ml import PipelineModel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mmlspark
from mmlspark.apps.camera_trap.detector import CROP_DECODE_SCALE, LoadedDetector, load_detector
from mmlspark.apps.camera_trap.labels import CctLabels
from mmlspark.apps.camera_trap.outputs import (
    _categories,
    _detection_entries,
    _detection_info,
    _detection_items,
    _detections_table,
    _relative_files,
    _write_csv,
    _write_json,
    _write_predictions,
    _write_video_summary,
    entries,
    write_detections,
    write_outputs,
)
from mmlspark.apps.camera_trap.predictions import (
    FRAMES,
    _levels,
    _max_conf,
    classified,
    featurizer_size,
    score,
    score_two_stage,
    trained_on_crops,
)
from mmlspark.apps.camera_trap.results import _model_identity, check_folders
from mmlspark.apps.camera_trap.run_loop import _locked_run
from mmlspark.apps.camera_trap.session import _qualified
from mmlspark.apps.camera_trap.settings import (
    DETECT_SCHEMA,
    SCHEMA,
    TWO_STAGE_SCHEMA,
    ClassifySettings,
    JobError,
    Log,
    _Work,
)
from mmlspark.apps.camera_trap.store import RunFolder, content_hash
from mmlspark.apps.camera_trap.videos import VideoSampling, read_units, settle, union
from mmlspark.image import ImageDecoder


def _classify_work(
    model: PipelineModel, levels: list[str], ensemble: bool, sampling: VideoSampling
) -> _Work:
    height, width = featurizer_size(model)
    decoder = ImageDecoder(minHeight=height, minWidth=width)

    def scored(listed: DataFrame, videos: bool) -> DataFrame:
        parts = read_units(listed, decoder, sampling, videos)
        rows = union([score(part, model, levels, ensemble) for part in parts])
        return settle(rows) if videos else rows

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder, videos: bool) -> None:
        assert folder.manifest is not None
        root = folder.manifest["images"]
        write_outputs(spark, rows, folder, levels, root, ordered=True, videos=videos)

    return _Work(
        "classify",
        SCHEMA,
        scored,
        outputs,
    )


def classify(
    spark: SparkSession,
    images: str,
    model_dir: str,
    out: str,
    *,
    overwrite: bool = False,
    bursts: str = "off",
    cct: str | None = None,
    burst_gap: float = 3.0,
    detector: str | None = None,
    threshold: float = 0.2,
    video_every_seconds: float = 1.0,
    video_every_frames: int = 0,
    wait: bool = False,
    settings: ClassifySettings | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Scores the photos under `images` into `out`, committing as it goes; a second call with
    the same arguments continues where the first stopped and ends with exactly one row per
    photo. With `bursts` 'cct' (sequences from the `cct` JSON's seq_id) or 'time' (photos of
    one folder taken at most `burst_gap` seconds apart, by EXIF time, see `with_bursts`) the
    probabilities of a burst's photos are averaged and the burst's class is every photo's
    prediction; `image_label` keeps each photo's own.

    With a `detector` (and a model trained on its crops, `train --detector`) the photos are
    detected first and the crops of animal detections at or over `threshold` classified; see
    `score_two_stage` for the class each photo gets. results.json then holds every detection
    (down to 0.005) with the classified ones' `classifications`.

    Video files (`videos.VIDEO_EXTENSIONS`) are scored by their frames, one every
    `video_every_seconds` or every `video_every_frames`-th: a row per sampled frame, each
    classified as a photo is (never averaged with other frames or photos)."""
    settings = settings or ClassifySettings()
    sampling = VideoSampling(video_every_seconds, video_every_frames)
    if bursts not in ("off", "cct", "time"):
        raise JobError(f"--bursts must be off, cct or time, not {bursts!r}")
    if bursts == "cct" and cct is None:
        raise JobError("--bursts cct needs --cct, the COCO Camera Traps JSON with seq_id")
    cct_labels = CctLabels.read(cct) if cct else None
    check_folders(images, Path(out))
    try:
        model = mmlspark.load_pipeline(model_dir)
        levels = _levels(model)
    except Exception as e:  # noqa: BLE001 - any failure to load is reported the same way
        raise JobError(f"cannot load a camera-trap model from {model_dir}: {e}") from None
    trained_on_crops(model, model_dir, detector, "classify")
    run: dict[str, Any] = {
        "images": _qualified(spark, images),
        "model": str(Path(model_dir).resolve()),
        **_model_identity(model_dir, model),
        "bursts": bursts if bursts != "time" else f"time:{burst_gap}",
        **sampling.identity(),
    }
    if detector is None:
        work = _classify_work(model, levels, bursts != "off", sampling)
    else:
        found = load_detector(spark, detector)
        run.update(
            detector=found.path,
            detector_sha256=content_hash(found.path),
            threshold=threshold,
            image_size=found.size,
        )
        work = _two_stage_work(
            model, levels, found, threshold, bursts != "off", Path(model_dir).name, sampling
        )
    return _locked_run(spark, work, out, run, overwrite, wait, cct_labels, burst_gap, settings, log)


def detect(
    spark: SparkSession,
    images: str,
    detector: str,
    out: str,
    *,
    threshold: float = 0.005,
    image_size: int | None = None,
    class_names: list[str] | None = None,
    video_every_seconds: float = 1.0,
    video_every_frames: int = 0,
    overwrite: bool = False,
    wait: bool = False,
    settings: ClassifySettings | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Runs a YOLO-format ONNX detector (MegaDetector v5 and the like) on the photos under
    `images` into `out`: results.json in the MegaDetector batch format, detections.csv (a row
    per detection, and one per photo without any) and the Parquet table. Commits as it goes; an
    interrupted run continues where it stopped, as classify does. Video files are detected by
    their frames, sampled as `classify` samples them."""
    sampling = VideoSampling(video_every_seconds, video_every_frames)
    check_folders(images, Path(out))
    found = load_detector(
        spark, detector, threshold=threshold, image_size=image_size, class_names=class_names
    )
    run = {
        "images": _qualified(spark, images),
        "detector": found.path,
        "detector_sha256": content_hash(found.path),
        "threshold": threshold,
        "image_size": found.size,
        **sampling.identity(),
    }
    work = _detect_work(found, sampling)
    return _locked_run(spark, work, out, run, overwrite, wait, None, 0.0, settings, log)


def _detect_work(found: LoadedDetector, sampling: VideoSampling) -> _Work:
    decoder = found.decoder()
    names = found.stage.getClassNames()

    def detected(read: DataFrame) -> DataFrame:
        rows = found.stage.transform(read)
        failure = F.coalesce("error", "detectionError")
        return rows.select(
            "path",
            "length",
            "modificationTime",
            F.when(failure.isNull(), F.col("detections")).alias("detections"),
            F.when(failure.isNull(), _max_conf("detections")).alias("max_detection_conf"),
            "burst",
            failure.alias("failure"),
            *FRAMES,
        )

    def score(listed: DataFrame, videos: bool) -> DataFrame:
        rows = union([detected(part) for part in read_units(listed, decoder, sampling, videos)])
        return settle(rows) if videos else rows

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder, videos: bool) -> None:
        assert folder.manifest is not None
        root = folder.manifest["images"]
        write_detections(spark, rows, folder, names, root, found.name, ordered=True, videos=videos)

    return _Work("detect", DETECT_SCHEMA, score, outputs)


def _two_stage_work(
    model: PipelineModel,
    levels: list[str],
    found: LoadedDetector,
    threshold: float,
    ensemble: bool,
    model_name: str,
    sampling: VideoSampling,
) -> _Work:
    decoder = found.decoder(CROP_DECODE_SCALE)
    cropper = found.cropper(threshold)
    names = found.stage.getClassNames()

    def score(listed: DataFrame, videos: bool) -> DataFrame:
        parts = read_units(listed, decoder, sampling, videos)
        crops = union([classified(model, cropper.transform(found.stage.transform(part)))
                       for part in parts])  # fmt: skip
        rows = score_two_stage(crops, levels, threshold, ensemble)
        return settle(rows) if videos else rows

    def outputs(spark: SparkSession, rows: DataFrame, folder: RunFolder, videos: bool) -> None:
        assert folder.manifest is not None
        ordered = _relative_files(rows, folder.manifest["images"], ordered=True)
        _write_predictions(folder, ordered)
        _write_csv(folder, _detections_table(ordered, species=True), "detections.csv")
        rest = {
            "detection_categories": _categories(names, 1),
            "classification_categories": _categories(levels, 0),
            "info": {
                **_detection_info(found.name),
                "classifier": f"mmlspark {mmlspark.__version__} camera-trap, {model_name}, "
                f"on crops of detections at or over {threshold}",
                "classification_completion_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            },
        }
        items = _detection_items(levels)
        _write_json(folder, entries(ordered, _detection_entries(levels), items, videos), rest)
        _write_video_summary(folder, ordered, items, rest, videos)
        folder.clean_staging()

    return _Work("classify", TWO_STAGE_SCHEMA, score, outputs)
