"""Videos in the camera-trap job: synthetic clips (a drawn animal moving over the demo's
vegetation, written as MJPEG AVI and as H.264 MP4 and MOV) next to photos, through detect,
classify and both stages. The reference for every sampled frame is the same frame extracted with
opencv-python into a PNG file and run through the same command as a photo."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from mmlspark.apps.camera_trap import job
from mmlspark.apps.camera_trap.make_demo import DETECTION_COATS, DETECTION_SIZE, background

DEMO = job.DEMO_DATA
DETECTOR = DEMO / "detection" / "detector.onnx"
FPS = 10.0
FRAMES = 25
#: name, codec: MJPEG in AVI written by OpenCV, H.264 in MP4 and MOV written by PyAV's FFmpeg
#: (libx264; OpenCV's wheels have no H.264 encoder). The job decodes all three with
#: opencv-python's FFmpeg.
CLIPS = {"cam1/clip_a.avi": "MJPG", "cam1/clip_b.mp4": "h264", "cam2/clip_c.mov": "h264"}


def clip_frames(seed: int) -> list[np.ndarray]:
    """A deer-coloured body and head crossing the frame (one frame in five empty)."""
    rng = np.random.default_rng(seed)
    height, width = DETECTION_SIZE
    scene, _ = background(rng, height, width)
    frames = []
    for k in range(FRAMES):
        frame = scene.copy()
        if k % 5 != 4:
            cx, cy = 40 + 7 * k, 80 + (k % 7) * 4
            cv2.ellipse(frame, (cx, cy), (26, 14), 0, 0, 360, DETECTION_COATS["deer"], -1)
            cv2.circle(frame, (cx + 26, cy - 14), 9, DETECTION_COATS["deer"], -1)
        frames.append(frame)
    return frames


def write_clip(path: Path, fourcc: str, frames: list[np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames[0].shape[:2]
    if fourcc == "h264":
        import av

        with av.open(str(path), "w") as container:
            stream = container.add_stream("libx264", rate=int(FPS))
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for frame in frames:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")))
            container.mux(stream.encode())
        return
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), FPS, (width, height))
    assert writer.isOpened(), fourcc
    for frame in frames:
        writer.write(frame)
    writer.release()


def sampled(every_frames: int) -> list[int]:
    """MegaDetector's rule, by hand: every k-th frame from 0."""
    return [n for n in range(FRAMES) if n % every_frames == 0]


@pytest.fixture(scope="module")
def survey(tmp_path_factory) -> tuple[Path, Path, dict[str, list[int]]]:
    """Photos and clips, plus the reference folders: each clip's sampled frames (every second:
    int(1.0 * 10 fps) = every 10th) decoded by opencv-python and saved as PNG photos, at full
    size (frames/) and at half size (frames-half/)."""
    root = tmp_path_factory.mktemp("video-survey")
    images, frames = root / "survey", root / "frames"
    rng = np.random.default_rng(7)
    from mmlspark.apps.camera_trap.make_demo import detection_photo

    for i, coat in enumerate(("deer", "empty")):
        photo, _ = detection_photo(rng, DETECTION_COATS[coat])
        (images / "photos").mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(images / "photos" / f"IMG_{i}.png"), photo)
    expected = {}
    for seed, (name, fourcc) in enumerate(CLIPS.items()):
        write_clip(images / name, fourcc, clip_frames(seed))
        capture = cv2.VideoCapture(str(images / name))
        decoded = []
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            decoded.append(frame)
        assert len(decoded) == FRAMES and capture.get(cv2.CAP_PROP_FPS) == FPS
        expected[name] = sampled(int(1.0 * FPS))
        for n in expected[name]:
            target = frames / name / f"frame{n:06d}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(target), decoded[n])
            # The whole-image classifier's 96 x 96 input is covered by half the 256 x 192 frame
            # (not by a quarter): frames are read at half size, as a JPEG photo would be.
            half = root / "frames-half" / name / f"frame{n:06d}.png"
            half.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(half), cv2.resize(decoded[n], (128, 96), interpolation=cv2.INTER_AREA))
    # A file named as a video that is none, and a clip cut in half.
    (images / "cam2" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(4000))
    whole = (images / "cam1" / "clip_a.avi").read_bytes()
    (images / "cam2" / "cut.avi").write_bytes(whole[: len(whole) // 2])
    return images, frames, expected


def validated(path: Path) -> dict:
    from megadetector.postprocessing.validate_batch_results import (
        ValidateBatchResultsOptions,
        validate_batch_results,
    )

    results = json.loads(path.read_text())
    options = ValidateBatchResultsOptions()
    options.raise_errors = True
    checked = validate_batch_results(results, options)["validation_results"]
    assert checked["errors"] == [], checked
    return results


def check_videos(out: Path, reference: Path, expected: dict[str, list[int]]) -> None:
    """The video entries of `out`'s results.json against the photo run `reference` on the
    extracted frames: frame rate, sampled frames, and per frame the same detections."""
    results = validated(out / "results.json")
    photos = {e["file"]: e for e in validated(reference / "results.json")["images"]}
    entries = {e["file"]: e for e in results["images"]}
    assert set(entries) == {"photos/IMG_0.png", "photos/IMG_1.png", *CLIPS, "cam2/broken.mp4",
                            "cam2/cut.avi"}  # fmt: skip
    for bad in ("cam2/broken.mp4", "cam2/cut.avi"):
        entry = entries[bad]
        assert entry["detections"] is None and entry["frame_rate"] == -1.0, entry
        assert "video" in entry["failure"] and entry["frames_processed"] == []
    assert "truncated" in entries["cam2/cut.avi"]["failure"]
    found = 0
    for name, numbers in expected.items():
        entry = entries[name]
        assert entry["frame_rate"] == FPS and entry["frames_processed"] == numbers
        for n in numbers:
            frame = photos[f"{name}/frame{n:06d}.png"]
            got = [d for d in entry["detections"] if d["frame_number"] == n]
            assert [{k: v for k, v in d.items() if k != "frame_number"} for d in got] == frame[
                "detections"
            ], (name, n)
            found += len(got)
        confs = [d["conf"] for d in entry["detections"]]
        assert entry["max_detection_conf"] == (max(confs) if confs else 0.0)
    assert found >= 6  # the drawn animal is seen in most sampled frames
    # The per-video summary: per category the most confident detection, as MegaDetector's
    # frame_results_to_video_results picks it.
    summary = {e["file"]: e for e in validated(out / "video_results.json")["images"]}
    assert set(summary) == {*CLIPS, "cam2/broken.mp4", "cam2/cut.avi"}
    for name in expected:
        dets = entries[name]["detections"]
        best = {}
        for d in dets:
            if d["category"] not in best or d["conf"] > best[d["category"]]["conf"]:
                best[d["category"]] = d
        assert summary[name]["detections"] == [best[c] for c in sorted(best)]


def test_detect_scores_video_frames_like_the_same_frames_as_photos(spark, survey, tmp_path):
    import csv

    images, frames, expected = survey
    out, reference = tmp_path / "out", tmp_path / "reference"
    summary = job.detect(spark, str(images), str(DETECTOR), str(out), log=print)
    job.detect(spark, str(frames), str(DETECTOR), str(reference), log=print)
    assert summary["photos"] == 7 and summary["failures"] == 2
    check_videos(out, reference, expected)
    rows = list(csv.DictReader((out / "detections.csv").open(newline="")))
    clip = [r for r in rows if r["path"] == "cam1/clip_a.avi"]
    assert {int(r["frame_number"]) for r in clip} <= set(expected["cam1/clip_a.avi"])
    assert all(float(r["frame_time"]) == int(r["frame_number"]) / FPS for r in clip)
    assert {r["frame_number"] for r in rows if r["path"].startswith("photos/")} == {""}

    # The committed table: a row per sampled frame, all of one commit; a second run scores none.
    table = spark.read.parquet(str(out / "predictions.parquet"))
    per_clip = table.filter("path LIKE '%clip_b.mp4'").orderBy("frame_number").collect()
    assert [r.frame_number for r in per_clip] == expected["cam1/clip_b.mp4"]
    assert [r.frame_time for r in per_clip] == [n / FPS for n in expected["cam1/clip_b.mp4"]]
    assert len({r.commit for r in per_clip}) == 1
    again = job.detect(spark, str(images), str(DETECTOR), str(out), log=print)
    assert again["scored"] == 0 and again["photos"] == 7


def test_sampling_by_frames_and_its_change_is_another_run(spark, survey, tmp_path):
    images, _, _ = survey
    out = tmp_path / "out"
    job.detect(spark, str(images), str(DETECTOR), str(out), video_every_frames=4, log=print)
    results = validated(out / "results.json")
    entry = next(e for e in results["images"] if e["file"] == "cam2/clip_c.mov")
    assert entry["frames_processed"] == sampled(4)
    with pytest.raises(job.JobError, match="video_sampling"):
        job.detect(spark, str(images), str(DETECTOR), str(out), log=print)


def test_classify_and_two_stage_score_frames_like_photos(
    spark, survey, demo_model, demo_run, tmp_path
):
    images, frames, expected = survey
    crop_model = demo_run[2] / "crop-model"  # the demo's two-stage classifier (read only)
    for stages, extra in (("whole", {}), ("two", {"detector": str(DETECTOR)})):
        model = crop_model if extra else demo_model
        runs = {}
        photos = frames if extra else frames.parent / "frames-half"
        for name, root in (("videos", images), ("frames", photos)):
            out = tmp_path / stages / name
            summary = job.classify(spark, str(root), str(model), str(out), log=print, **extra)
            runs[name] = spark.read.parquet(str(out / "predictions.parquet")).collect()
        assert summary["failures"] == 0 and summary["photos"] == sum(map(len, expected.values()))
        videos = validated(tmp_path / stages / "videos" / "results.json")
        assert {e["file"] for e in videos["images"] if "failure" in e} == {
            "cam2/broken.mp4",
            "cam2/cut.avi",
        }
        validated(tmp_path / stages / "videos" / "video_results.json")
        reference = {r.path.rsplit("/", 2)[-2:][0] + "/" + r.path.rsplit("/", 1)[-1]: r
                     for r in runs["frames"]}  # fmt: skip
        checked = 0
        for name, numbers in expected.items():
            clip = sorted(
                (r for r in runs["videos"] if r.path.endswith(name)), key=lambda r: r.frame_number
            )
            assert [r.frame_number for r in clip] == numbers
            for row, n in zip(clip, numbers, strict=True):
                ref = reference[f"{name.rsplit('/', 1)[-1]}/frame{n:06d}.png"]
                assert row.predicted_label == ref.predicted_label, (stages, name, n)
                assert row.confidence == pytest.approx(ref.confidence, rel=1e-9)
                assert [t.label for t in row.top_k] == [t.label for t in ref.top_k]
                if extra:
                    assert row.detections == ref.detections
                assert row.frame_time == n / FPS and row.frame_rate == FPS
                checked += 1
        assert checked == sum(len(v) for v in expected.values())
