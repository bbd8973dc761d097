"""The camera-trap job end to end on the embedded demo photos (small copies of them)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from sklearn import metrics

import mmlspark
from mmlspark.apps.camera_trap import __main__ as cli
from mmlspark.apps.camera_trap import job

DEMO = job.DEMO_DATA


def _copy(target: Path, names: list[str], every: int = 1, offset: int = 0) -> list[Path]:
    copied = []
    for label in names:
        for photo in sorted((DEMO / "images" / label).glob("*.jpg"))[offset::every]:
            destination = target / label / photo.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(photo, destination)
            copied.append(destination)
    return copied


def check_megadetector_format(results: dict, files: set[str]) -> None:
    """The fields of the MegaDetector batch output format that review tools read."""
    assert set(results) >= {"images", "detection_categories", "info"}
    assert results["info"]["format_version"] == "1.6"
    detection_categories = results["detection_categories"]
    classification_categories = results["classification_categories"]
    assert {e["file"] for e in results["images"]} == files
    for entry in results["images"]:
        assert not entry["file"].startswith("/") and ":" not in entry["file"]  # relative
        if "failure" in entry:
            assert isinstance(entry["failure"], str) and entry["failure"]
            assert entry["detections"] is None
            continue
        assert 0.0 <= entry["max_detection_conf"] <= 1.0
        for d in entry["detections"]:
            assert d["category"] in detection_categories
            assert 0.0 <= d["conf"] <= 1.0
            assert len(d["bbox"]) == 4 and all(0.0 <= v <= 1.0 for v in d["bbox"])
            for category, p in d.get("classifications", []):
                assert category in classification_categories and 0.0 <= p <= 1.0


def test_demo_trains_classifies_and_evaluates_well_above_chance(demo_run):
    summary, lines, demo = demo_run
    assert summary["accuracy"] > 0.8, lines  # chance is 1/3
    out = demo / "predictions"
    rows = list(csv.DictReader((out / "predictions.csv").open()))
    assert len(rows) == 30 and all(r["predicted_label"] in {"deer", "fox", "empty"} for r in rows)
    results = json.loads((out / "results.json").read_text())
    check_megadetector_format(results, {r["path"] for r in rows})
    evaluation = json.loads((demo / "evaluation" / "metrics.json").read_text())
    truth = [r["path"].split("/")[0] for r in rows]
    assert evaluation["accuracy"] == pytest.approx(
        metrics.accuracy_score(truth, [r["predicted_label"] for r in rows])
    )
    assert any("synthetic photos" in line for line in lines)  # provenance is stated
    import cv2

    matrix = cv2.imread(str(demo / "evaluation" / "confusion_matrix.png"))
    grid = cv2.imread(str(demo / "evaluation" / "samples.png"))
    assert matrix is not None and grid is not None
    assert grid.shape[1] == 4 * 128 and grid.shape[0] == 4 * (128 + 22)  # 16 photos, 4 a row
    # Perfect predictions: the diagonal cells are dark, the others white (cells 70 px from 110, 40).
    cells = [[matrix[40 + 70 * i + 10, 110 + 70 * j + 60] for j in range(3)] for i in range(3)]
    # (BGR: a full row share is dark blue, no red; an empty cell is white.)
    assert all(cells[i][i][2] < 60 and cells[i][(i + 1) % 3].sum() == 765 for i in range(3))


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_cli_folder_and_cct_inputs_with_a_corrupt_file_and_resume(spark, tmp_path, backend):
    """The commands with the jar, and without it (--backend python: files listed by binaryFile,
    read and scored by the Python workers), on the same photos."""
    try:
        _cli_folder_and_cct_inputs(tmp_path, ["--backend", backend])
    finally:
        mmlspark.set_backend(None)


def _cli_folder_and_cct_inputs(tmp_path: Path, backend: list[str]) -> None:
    images = tmp_path / "survey"
    _copy(images, ["deer", "fox", "empty"], every=2)
    (images / "deer" / "broken.jpg").write_bytes(b"\xff\xd8 truncated")
    model = tmp_path / "model"
    featurizer = str(DEMO / "featurizer.onnx")
    assert cli.main([*backend, "train", "--images", str(images), "--featurizer", featurizer,
                     "--model-out", str(model)]) == 0  # fmt: skip

    # COCO Camera Traps labels for new photos (category 0 is empty), scored in two sittings.
    new = tmp_path / "new"
    first = _copy(new, ["deer", "fox", "empty"], every=4, offset=1)
    categories = [{"id": 0, "name": "empty"}, {"id": 1, "name": "deer"}, {"id": 2, "name": "fox"}]
    ids = {c["name"]: c["id"] for c in categories}
    out = tmp_path / "run"
    assert (
        cli.main(
            [*backend, "classify", "--images", str(new), "--model", str(model), "--out", str(out)]
        )
        == 0
    )
    before = {r["path"]: r for r in csv.DictReader((out / "predictions.csv").open())}
    assert len(before) == len(first)
    later = _copy(new, ["deer", "fox", "empty"], every=4, offset=3)
    (new / "notes.txt").write_text("not a photo")
    assert (
        cli.main(
            [*backend, "classify", "--images", str(new), "--model", str(model), "--out", str(out)]
        )
        == 0
    )
    after = {r["path"]: r for r in csv.DictReader((out / "predictions.csv").open())}
    assert len(after) == len(first) + len(later) + 1  # nothing scored twice
    assert all(after[p] == before[p] for p in before)  # earlier results kept as they were
    assert after["notes.txt"]["failure"] and not after["notes.txt"]["predicted_label"]
    results = json.loads((out / "results.json").read_text())
    check_megadetector_format(results, set(after))
    assert next(e for e in results["images"] if e["file"] == "notes.txt")["failure"]

    photos = [p for p in new.rglob("*.jpg")]
    cct = {
        "images": [{"id": i, "file_name": str(p.relative_to(new)), "seq_id": f"s{i // 3}",
                    "frame_num": i % 3, "location": "L1", "datetime": "2024-05-01 10:00:00"}
                   for i, p in enumerate(photos)],
        "annotations": [{"id": i, "image_id": i, "category_id": ids[p.parent.name]}
                        for i, p in enumerate(photos)],
        "categories": categories,
    }  # fmt: skip
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(cct))
    assert cli.main([*backend, "evaluate", "--predictions", str(out), "--labels", str(labels),
                     "--out", str(tmp_path / "eval")]) == 0  # fmt: skip
    scored = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    pairs = [(p.split("/")[0], r["predicted_label"]) for p, r in after.items() if "/" in p]
    truth, predicted = zip(*pairs, strict=True)
    assert scored["accuracy"] == pytest.approx(metrics.accuracy_score(truth, predicted))
    assert scored["photos"] == len(pairs) and scored["failures"] == 1
    precision = metrics.precision_score(truth, predicted, labels=scored["labels"], average=None)
    assert list(scored["precision_per_class"].values()) == pytest.approx(list(precision))

    # Training from the CCT file instead of folder names gives the same classes.
    model2 = str(tmp_path / "model2")
    assert cli.main([*backend, "train", "--images", str(new), "--labels", str(labels),
                     "--featurizer", featurizer, "--model-out", model2]) == 0  # fmt: skip
    # Another model into the same results is refused; --overwrite starts over.
    again = [
        "classify",
        "--images",
        str(new),
        "--model",
        str(tmp_path / "model2"),
        "--out",
        str(out),
    ]
    assert cli.main(backend + again) == 2
    assert cli.main(backend + again + ["--overwrite"]) == 0


def test_unreadable_inputs_fail_before_spark_work(spark, tmp_path, capsys):
    code = cli.main(["train", "--images", str(tmp_path), "--featurizer", str(tmp_path / "no.onnx"),
                     "--model-out", str(tmp_path / "m")])  # fmt: skip
    assert code == 2 and "cannot read the featurizer model" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(job.JobError, match="cannot read COCO Camera Traps labels"):
        job.CctLabels.read(str(tmp_path / "bad.json"))
    (tmp_path / "photos").mkdir()
    code = cli.main(["classify", "--images", str(tmp_path / "photos"), "--model",
                     str(tmp_path / "none"), "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 2 and "cannot load a camera-trap model" in capsys.readouterr().err


def test_burst_ensembling_by_sequence_and_by_time(spark, demo_model, tmp_path):
    import os

    model = demo_model
    new = tmp_path / "new"
    photos = _copy(new, ["deer", "fox"], every=8, offset=2)  # 5 + 5 photos
    # Sequences of the CCT file: the photos of each folder in threes (and a single).
    cct = {"images": [], "annotations": [], "categories": [{"id": 0, "name": "empty"}]}
    for i, p in enumerate(sorted(photos)):
        rank = sorted(q for q in photos if q.parent == p.parent).index(p)
        seq = f"{p.parent.name}-{rank // 3}"
        cct["images"].append({"id": i, "file_name": str(p.relative_to(new)), "seq_id": seq})
        # File times for the time rule: bursts of three, 100 s apart.
        os.utime(p, (1_700_000_000 + 100 * (rank // 3) + rank % 3,) * 2)
    (tmp_path / "cct.json").write_text(json.dumps(cct))

    def run(name: str, *extra: str) -> dict[str, dict]:
        out = tmp_path / name
        args = ["classify", "--images", str(new), "--model", str(model), "--out", str(out)]
        assert cli.main(args + list(extra)) == 0
        table = spark.read.parquet(str(out / "predictions.parquet")).collect()
        return {Path(r.path).name: r for r in table}

    by_sequence = run("cct", "--bursts", "cct", "--cct", str(tmp_path / "cct.json"))
    for rows in (by_sequence, run("time", "--bursts", "time")):
        groups: dict[str, set] = {}
        for r in rows.values():
            groups.setdefault(r.burst, set()).add(r.predicted_label)
        assert len(groups) == 4  # deer 3 + 2, fox 3 + 2
        assert all(len(labels) == 1 for labels in groups.values())  # one class per burst
    alone = run("off")
    assert all(r.burst is None and r.predicted_label == r.image_label for r in alone.values())
    assert cli.main(["evaluate", "--predictions", str(tmp_path / "time"),
                     "--out", str(tmp_path / "eval")]) == 0  # fmt: skip
    scored = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert scored["bursts"] == "time:3.0" and 0 <= scored["accuracy_per_photo"] <= 1


def test_demo_detection_part_finds_the_drawn_animals_and_nothing_on_empty_photos(demo_run):
    from megadetector.postprocessing.validate_batch_results import (
        ValidateBatchResultsOptions,
        validate_batch_results,
    )

    summary, lines, demo = demo_run
    results = json.loads((demo / "detections" / "results.json").read_text())
    options = ValidateBatchResultsOptions()
    options.raise_errors = True
    assert validate_batch_results(results, options)["validation_results"]["errors"] == []
    # Against the drawn boxes, in pixels, independently of the job's evaluate.
    cct = json.loads((DEMO / "detection" / "boxes.json").read_text())
    images = {i["id"]: i for i in cct["images"]}
    truth = {images[a["image_id"]]["file_name"]: a.get("bbox") for a in cct["annotations"]}
    entries = {e["file"]: e for e in results["images"]}
    assert set(entries) == set(truth)
    found = 0
    for name, box in truth.items():
        confident = [d for d in entries[name]["detections"] if d["conf"] >= 0.2]
        if box is None:
            assert confident == [], name  # nothing on an empty photo over the threshold
            continue
        w, h = next((i["width"], i["height"]) for i in cct["images"] if i["file_name"] == name)
        for d in confident:
            x, y, bw, bh = d["bbox"]
            ix = min(x * w + bw * w, box[0] + box[2]) - max(x * w, box[0])
            iy = min(y * h + bh * h, box[1] + box[3]) - max(y * h, box[1])
            inter = max(ix, 0) * max(iy, 0)
            if inter / (bw * w * bh * h + box[2] * box[3] - inter) >= 0.5:
                found += 1
                break
    animals = sum(b is not None for b in truth.values())
    assert found / animals >= 0.9, (found, animals)
    assert summary["detection_recall"] >= 0.9 and summary["empty_filter"]["fp"] == 0
    # Both stages on the held-out quarter: each photo's class against its folder.
    rows = list(csv.DictReader((demo / "two-stage" / "predictions.csv").open()))
    truth = [r["path"].split("/")[0] for r in rows]
    accuracy = metrics.accuracy_score(truth, [r["predicted_label"] for r in rows])
    assert len(rows) == summary["two_stage_photos"] == 12 and accuracy >= 0.9, rows
    assert summary["two_stage_accuracy"] == pytest.approx(accuracy)
    two = json.loads((demo / "two-stage" / "results.json").read_text())
    assert validate_batch_results(two, options)["validation_results"]["errors"] == []
    check_megadetector_format(two, {r["path"] for r in rows})
    species = {"0": "deer", "1": "fox"}
    assert two["classification_categories"] == species
    for entry, row in zip(two["images"], rows, strict=True):
        classified = [d for d in entry["detections"] if "classifications" in d]
        # Exactly the animal detections at or over the crop threshold carry species.
        assert classified == [d for d in entry["detections"] if d["conf"] >= 0.2], entry
        if row["predicted_label"] == "empty":
            assert classified == []
        else:
            best = max(classified, key=lambda d: d["conf"])["classifications"][0]
            assert species[best[0]] == row["predicted_label"]
            assert best[1] == pytest.approx(float(row["confidence"]), abs=1e-4)
    assert any("synthetic detector" in line for line in lines)  # provenance is stated
    assert (demo / "detection-evaluation" / "samples.png").is_file()


@pytest.mark.parametrize("backend", ["jvm", "python"])
def test_bursts_by_time_read_exif_then_cct_then_file_time(spark, tmp_path, backend):
    """Copying a survey resets file times: bursts come from the time the camera wrote, read by the
    jar's readers or (without the jar) by the Python workers."""
    import os
    import time as clock

    import cv2
    import numpy as np
    from image_fixtures import encode, with_exif_datetime, with_exif_orientation

    from mmlspark.image import list_files

    cam = tmp_path / "survey" / "cam1"
    cam.mkdir(parents=True)
    jpeg = encode(np.full((16, 16, 3), 90, np.uint8), ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90])
    taken = {"a": "10:00:00", "b": "10:00:02", "c": "10:00:04", "d": "10:05:00"}
    for name, at in taken.items():
        (cam / f"{name}.jpg").write_bytes(with_exif_datetime(jpeg, f"2024:05:01 {at}"))
    (cam / "e.png").write_bytes(encode(np.zeros((8, 8, 3), np.uint8), ".png"))  # CCT time only
    (cam / "f.png").write_bytes(encode(np.zeros((8, 8, 3), np.uint8), ".png"))  # neither
    (cam / "g.jpg").write_bytes(with_exif_orientation(jpeg, 1))  # EXIF without a time
    now = clock.time()
    for photo in cam.iterdir():  # as a copy leaves them: every file written at once
        os.utime(photo, (now, now + (1 if photo.name == "f.png" else 0)))
    cct = tmp_path / "cct.json"
    cct.write_text(
        json.dumps(
            {
                "images": [{"id": 0, "file_name": "cam1/e.png", "datetime": "2024-05-01 10:05:01"}],
                "annotations": [],
                "categories": [],
            }
        )
    )
    mmlspark.set_backend(backend)
    try:
        root = job._qualified(spark, str(tmp_path / "survey"))
        listing = list_files(spark, root)
        bursts = job.with_bursts(spark, listing, root, "time", job.CctLabels.read(str(cct)), 3.0)
        bursts = bursts.collect()
    finally:
        mmlspark.set_backend(None)
    groups: dict[str, set[str]] = {}
    for row in bursts:
        groups.setdefault(row.burst, set()).add(Path(row.path).name)
    assert sorted(map(sorted, groups.values())) == [
        ["a.jpg", "b.jpg", "c.jpg"],
        ["d.jpg", "e.png"],
        ["f.png", "g.jpg"],
    ]


def test_two_stage_bursts_people_failures_and_models_that_do_not_match(
    spark, demo_run, tmp_path, capsys
):
    """classify --detector beyond the demo's happy path, with the demo's crop model: the burst
    mean of the photos' species probabilities, a photo whose only confident detection is a
    person, an unreadable file, and models trained the other way refused before any work."""
    import numpy as np
    import onnx_models

    from mmlspark.apps.camera_trap.store import RunFolder

    _, _, demo = demo_run
    crop_model = str(demo / "crop-model")
    detector = str(DEMO / "detection" / "detector.onnx")
    images = tmp_path / "survey"
    for name in ("fox/fox_000", "fox/fox_004", "deer/deer_000", "empty/empty_000"):
        target = images / f"{name}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DEMO / "detection" / "images" / f"{name}.jpg", target)
    (images / "broken.jpg").write_bytes(b"not a photo")
    sequences = {"fox/fox_000.jpg": "a", "empty/empty_000.jpg": "a",
                 "fox/fox_004.jpg": "b", "deer/deer_000.jpg": "b"}  # fmt: skip
    cct = tmp_path / "cct.json"
    cct.write_text(json.dumps({
        "images": [{"id": i, "file_name": f, "seq_id": s}
                   for i, (f, s) in enumerate(sequences.items())],
        "annotations": [], "categories": [],
    }))  # fmt: skip

    def run(name: str, *extra: str, model: str = crop_model, det: str = detector) -> dict:
        out = tmp_path / name
        args = ["classify", "--images", str(images), "--model", model, "--out", str(out)]
        assert cli.main([*args, "--detector", det, *extra]) == 0
        rows = job.current(job.committed(spark, RunFolder(out))).collect()
        return {r.path.split("/survey/")[1]: r for r in rows}

    alone = run("alone")
    bursts = run("bursts", "--bursts", "cct", "--cct", str(cct))
    levels = ["deer", "fox"]

    def probabilities(row) -> np.ndarray:
        found = {t.label: t.probability for t in row.top_k}
        return np.array([found[label] for label in levels])

    # Burst a: the empty photo takes the fox's species, and keeps its own in image_label.
    assert alone["empty/empty_000.jpg"].predicted_label == "empty"
    assert bursts["empty/empty_000.jpg"].image_label == "empty"
    assert bursts["empty/empty_000.jpg"].predicted_label == alone["fox/fox_000.jpg"].image_label
    # Burst b: the mean of its two photos' probabilities, the same class for both.
    mean = (probabilities(alone["fox/fox_004.jpg"]) + probabilities(alone["deer/deer_000.jpg"])) / 2
    for name in ("fox/fox_004.jpg", "deer/deer_000.jpg"):
        assert bursts[name].predicted_label == levels[int(np.argmax(mean))]
        assert bursts[name].confidence == pytest.approx(mean.max(), abs=1e-9)
        assert bursts[name].image_label == alone[name].predicted_label == name.split("/")[0]
    broken = bursts["broken.jpg"]
    assert broken.failure and broken.predicted_label is None and broken.detections is None
    results = json.loads((tmp_path / "bursts" / "results.json").read_text())
    check_megadetector_format(results, {f"{n}" for n in alone})

    # A detector that sees a person (0.9) and, faintly, an animal (0.1) in every photo.
    raw = np.array([[64, 64, 40, 60, 0.9, 0.0, 1.0, 0.0], [32, 32, 30, 30, 0.1, 1.0, 0.0, 0.0]])
    people = tmp_path / "people.onnx"
    people.write_bytes(onnx_models.yolo_constant(raw.astype(np.float32), size=128))
    person = run("person", det=str(people))["fox/fox_000.jpg"]
    assert (person.predicted_label, person.confidence) == ("person", pytest.approx(0.9))
    assert person.top_k is None and all(d.classifications is None for d in person.detections)
    faint = run("faint", "--threshold", "0.05", det=str(people))["fox/fox_000.jpg"]
    assert faint.predicted_label in levels  # the animal crop is classified: a species wins
    assert [d.classifications is None for d in faint.detections] == [True, False]

    # train --detector from the command line: counts what it learns from, refuses no crops.
    train = ["train", "--featurizer", str(DEMO / "featurizer.onnx"), "--detector", detector]
    assert cli.main([*train, "--images", str(images), "--model-out", str(tmp_path / "m")]) == 0
    said = capsys.readouterr().out
    assert "5 files, 1 not decodable, 3 labelled photos with an animal, 3 crops" in said, said
    assert "classes ['deer', 'fox']" in said
    empties = tmp_path / "empties"
    _copy(empties, ["empty"], every=8)
    assert cli.main([*train, "--images", str(empties), "--model-out", str(tmp_path / "n")]) == 2
    assert "no detection at or over 0.2" in capsys.readouterr().err

    # Models and commands that do not go together fail before any Spark work, saying why.
    whole = ["classify", "--images", str(images), "--out", str(tmp_path / "x")]
    assert cli.main([*whole, "--model", crop_model]) == 2
    assert "needs --detector" in capsys.readouterr().err
    assert cli.main([*whole, "--model", str(demo / "model"), "--detector", detector]) == 2
    assert "train --detector" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()

    # A new photo arrives, at a camera's 12 MP: the same command scores only it, from a reduced
    # decode, and keeps the others' rows.
    import cv2

    fox = cv2.imread(str(DEMO / "detection" / "images" / "fox" / "fox_008.jpg"))
    big = cv2.resize(fox, (4000, 3000), interpolation=cv2.INTER_CUBIC)
    cv2.imwrite(str(images / "fox" / "fox_008.jpg"), big, [cv2.IMWRITE_JPEG_QUALITY, 90])
    again = run("alone")
    assert "this run 1 photos" in capsys.readouterr().out
    assert again.keys() == alone.keys() | {"fox/fox_008.jpg"}
    assert all(again[name].commit == alone[name].commit for name in alone)
    assert again["fox/fox_008.jpg"].predicted_label == "fox"
