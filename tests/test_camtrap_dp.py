"""The Camtrap DP export of the camera-trap job: results folders written through the store's own
writers (synthetic rows of the committed tables, results.json by the job's output writers) over
photos whose EXIF times pillow writes, exported, validated by frictionless against the job's
table schemas and checked against the rows, the photos and results.json."""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import shutil
from pathlib import Path

import frictionless
import pytest

from mmlspark.apps.camera_trap import __main__ as cli
from mmlspark.apps.camera_trap import job, store
from mmlspark.apps.camera_trap.camtrap_dp import local_descriptor

#: The survey: photo -> the camera's EXIF DateTimeOriginal (None: no EXIF).
TAKEN = {
    "camA/a.jpg": "2024:05:01 10:00:00",
    "camA/b.jpg": "2024:05:01 10:00:02",
    "camA/c.jpg": "2024:05:01 10:05:00",
    "camB/d.jpg": "2024:06:01 08:00:00",
    "camB/e.jpg": None,
    "f.jpg": "2024:05:02 12:00:00",
}
#: e.jpg's file time as the listing committed it: 2024-06-01 08:20:00 UTC.
E_SECONDS = 1717230000
#: Detections per photo: (category, label, conf, bbox).
DETECTIONS = {
    "camA/a.jpg": [
        ("1", "animal", 0.9, [0.1, 0.2, 0.3, 0.4]),
        ("2", "person", 0.5, [0.5, 0.5, 0.2, 0.2]),
        ("1", "animal", 0.1, [0.0, 0.0, 0.1, 0.1]),
    ],
    "camA/b.jpg": [
        ("1", "animal", 0.85, [0.12, 0.2, 0.3, 0.4]),
        ("1", "animal", 0.8, [0.6, 0.1, 0.2, 0.3]),
    ],
    "camA/c.jpg": [],
    "camB/d.jpg": [("3", "vehicle", 0.7, [0.0, 0.5, 0.5, 0.5])],
    "camB/e.jpg": [("1", "animal", 0.15, [0.2, 0.2, 0.2, 0.2])],
    "f.jpg": [("1", "animal", 0.95, [0.3, 0.3, 0.1, 0.1])],
}
FAILED = "broken.jpg"


@pytest.fixture(scope="module")
def survey(tmp_path_factory) -> Path:
    """The photos, EXIF times written by pillow, and one file that is not a photo."""
    from PIL import Image

    root = tmp_path_factory.mktemp("camtrap") / "survey"
    for relative, taken in TAKEN.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        exif = Image.Exif()
        if taken:
            exif.get_ifd(0x8769)[0x9003] = taken
        buffer = io.BytesIO()
        Image.new("RGB", (32, 24), (90, 120, 60)).save(buffer, "JPEG", exif=exif)
        path.write_bytes(buffer.getvalue())
    (root / FAILED).write_bytes(b"not a photo")
    return root


def _results(
    spark, folder_path: Path, root: str, run: dict, schema: str, rows: list, frames: bool = False
) -> Path:
    """A finished results folder: one commit through the store, then results.json by the job's
    writer (as a run ends). Unless `frames`, the rows are photos' and get no video frame columns
    (frame_number, frame_time, frame_rate, before the commit)."""
    folder = store.RunFolder(folder_path)
    folder.start({"images": root, "bursts": "off", **run})
    if not frames:
        rows = [(*r[:-1], None, None, None, r[-1]) for r in rows]
    table = spark.createDataFrame(rows, schema)
    staged = folder.staged("commit-00000001")
    table.write.parquet(str(staged))
    folder.commit(staged, 1)
    if "detections" in schema:
        job.write_detections(spark, table, folder, ["animal", "person", "vehicle"], root, "md")
    else:
        job.write_outputs(spark, table, folder, ["deer", "empty", "fox"], root)
    return folder_path


def _file_time(relative: str) -> datetime.datetime:
    seconds = E_SECONDS if relative == "camB/e.jpg" else 1_700_000_000
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def _read(folder: Path, table: str) -> list[dict[str, str]]:
    with (folder / f"{table}.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _validate(package: Path) -> frictionless.Report:
    return frictionless.validate(local_descriptor(package), basepath=str(package))


def _deployments_csv(path: Path) -> Path:
    path.write_text(
        "deploymentID,folder,latitude,longitude,locationName\n"
        "camA,,52.1,4.3,Pond\n"
        "B-02,camB,52.2,4.4,Track\n"
        "survey,,52.0,4.0,Gate\n"
    )
    return path


def _metadata(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "title": "Test survey",
                "contributors": [{"title": "A. Ranger", "role": "principalInvestigator"}],
                "project": {"samplingDesign": "opportunistic"},
            }
        )
    )
    return path


def test_detect_results_export_as_a_valid_camtrap_dp_package(spark, survey, tmp_path):
    root = job._qualified(spark, str(survey))
    rows = [
        (f"{root}/{relative}", 1, _file_time(relative),
         [{"category": c, "label": label, "conf": conf, "bbox": box}
          for c, label, conf, box in found], max((d[2] for d in found), default=0.0), None, None, 1)
        for relative, found in DETECTIONS.items()
    ] + [(f"{root}/{FAILED}", 11, _file_time(FAILED), None, None, None, "bad", 1)]  # fmt: skip
    run = {"detector": "/models/md_v5a.onnx", "detector_sha256": "ab" * 32, "threshold": 0.005}
    results = _results(spark, tmp_path / "det", root, run, job.DETECT_SCHEMA, rows)
    out = tmp_path / "package"

    # Without deployments and metadata: written, and said to be incomplete, and it is.
    summary = job.export(spark, str(results), str(out), timezone="+02:00", log=print)
    assert any("latitude and longitude of 3 deployments" in m for m in summary["missing"])
    assert len(summary["missing"]) == 3  # coordinates, contributors, samplingDesign
    report = _validate(out)
    assert not report.valid
    assert "constraint-error" in {row[0] for row in report.flatten(["type"])}

    # The documented path: its deployments.csv with the coordinates filled in, and metadata
    # (replacing the earlier export): valid, and every value checks out.
    places = {"camA": ("52.1", "4.3"), "camB": ("52.2", "4.4"), "survey": ("52.0", "4.0")}
    template = _read(out, "deployments")
    for row in template:
        row["latitude"], row["longitude"] = places[row["deploymentID"]]
    filled = tmp_path / "deployments.csv"
    with filled.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(template[0]))
        writer.writeheader()
        writer.writerows(template)
    summary = job.export(
        spark, str(results), str(out), timezone="+02:00", overwrite=True, log=print,
        deployments=str(filled), metadata=str(_metadata(tmp_path / "metadata.json")),
    )  # fmt: skip
    assert summary["missing"] == []
    report = _validate(out)
    assert report.valid, report.flatten(["type", "note"])
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "datapackage.json",
        "deployments.csv",
        "media.csv",
        "observations.csv",
    ]

    media = {m["filePath"]: m for m in _read(out, "media")}
    assert sorted(media) == sorted(TAKEN)  # every photo read, the failure left out
    for relative, taken in TAKEN.items():
        if taken:  # the EXIF time in the given offset
            day, clock = taken.split(" ")
            expected = f"{day.replace(':', '-')}T{clock}+02:00"
        else:  # the committed file time, shown in that offset
            expected = "2024-06-01T10:20:00+02:00"
        assert media[relative]["timestamp"] == expected, relative
        assert (media[relative]["mediaComments"] == "") == bool(taken)
        assert media[relative]["fileMediatype"] == "image/jpeg"
        assert media[relative]["filePublic"] == "false"
    deployments = {d["deploymentID"]: d for d in _read(out, "deployments")}
    assert {m["deploymentID"] for m in media.values()} == set(deployments) == set(places)
    assert media["camB/d.jpg"]["deploymentID"] == "camB"
    assert media["f.jpg"]["deploymentID"] == "survey"
    assert deployments["camA"]["deploymentStart"] == "2024-05-01T10:00:00+02:00"
    assert deployments["camA"]["deploymentEnd"] == "2024-05-01T10:05:00+02:00"
    assert deployments["camB"]["deploymentEnd"] == "2024-06-01T10:20:00+02:00"  # e.jpg's file time
    assert deployments["camB"]["latitude"] == "52.2"

    observations = _read(out, "observations")
    by_media = {}
    for o in observations:
        assert o["deploymentID"] in deployments and o["classificationMethod"] == "machine"
        if o["observationLevel"] == "media":
            assert o["mediaID"] in {m["mediaID"] for m in media.values()}
            by_media.setdefault(o["mediaID"], []).append(o)
    # One observation per detection at or over 0.2, one blank per photo without any.
    expected_count = sum(max(1, sum(d[2] >= 0.2 for d in found)) for found in DETECTIONS.values())
    assert sum(map(len, by_media.values())) == expected_count == 8
    assert summary["media"] == 6
    results_json = {
        i["file"]: i for i in json.loads((results / "results.json").read_text())["images"]
    }
    kinds = {"animal": "animal", "person": "human", "vehicle": "vehicle"}
    for relative, row in media.items():
        seen = by_media[row["mediaID"]]
        kept = [d for d in results_json[relative]["detections"] if d["conf"] >= 0.2]
        if not kept:
            assert [o["observationType"] for o in seen] == ["blank"]
            continue
        names = {"1": "animal", "2": "person", "3": "vehicle"}
        assert [o["observationType"] for o in seen] == [kinds[names[d["category"]]] for d in kept]
        for o, d in zip(seen, kept, strict=True):
            box = [float(o[k]) for k in ("bboxX", "bboxY", "bboxWidth", "bboxHeight")]
            assert box == pytest.approx(d["bbox"], abs=1e-4 + 1e-9)
            assert float(o["classificationProbability"]) == pytest.approx(d["conf"], abs=1e-3)
            assert o["classifiedBy"] == "md_v5a.onnx (sha256 abababababab)"
            assert o["scientificName"] == ""  # no --taxa: the label only in a tag
    # Events: photos of one folder at most 3 s apart; the event-level summary of a and b counts
    # the most animals any one photo shows (b: 2) and the person.
    a, b, c = (by_media[media[f"camA/{n}.jpg"]["mediaID"]][0] for n in "abc")
    assert a["eventID"] == b["eventID"] != c["eventID"]
    assert (a["eventStart"], a["eventEnd"]) == (
        "2024-05-01T10:00:00+02:00",
        "2024-05-01T10:00:02+02:00",
    )
    events = [o for o in observations if o["eventID"] == a["eventID"]]
    summaries = {o["observationType"]: o for o in events if o["observationLevel"] == "event"}
    assert set(summaries) == {"animal", "human"}
    assert (summaries["animal"]["count"], summaries["human"]["count"]) == ("2", "1")
    assert float(summaries["animal"]["classificationProbability"]) == pytest.approx(0.9)
    assert summaries["animal"]["mediaID"] == ""

    descriptor = json.loads((out / "datapackage.json").read_text())
    assert descriptor["profile"].endswith("/camtrap-dp/1.0/camtrap-dp-profile.json")
    assert descriptor["temporal"] == {"start": "2024-05-01", "end": "2024-06-01"}
    assert descriptor["spatial"]["bbox"] == [4.0, 52.0, 4.4, 52.2]
    assert descriptor["project"]["samplingDesign"] == "opportunistic"
    assert [r["name"] for r in descriptor["resources"]] == ["deployments", "media", "observations"]


def test_a_video_is_one_medium_with_the_best_detection_of_each_category(spark, survey, tmp_path):
    # A photo and a video's three sampled frames (0, 10 and 20 at 10 frames/s) in a detect run.
    images = tmp_path / "survey"
    (images / "camA").mkdir(parents=True)
    shutil.copy(survey / "camA" / "a.jpg", images / "camA" / "a.jpg")
    (images / "camA" / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")  # not read
    root = job._qualified(spark, str(images))

    def found(*detections):
        return [{"category": c, "label": n, "conf": p, "bbox": b} for c, n, p, b in detections]

    animal_at = [0.3, 0.1, 0.2, 0.2]
    frames = {
        0: found(("1", "animal", 0.6, [0.1, 0.1, 0.2, 0.2])),
        10: found(("1", "animal", 0.8, animal_at), ("2", "person", 0.4, [0.5, 0.5, 0.1, 0.1])),
        20: [],
    }
    when = _file_time("camA/clip.mp4")
    rows = [(f"{root}/camA/a.jpg", 1, when, found(("1", "animal", 0.9, [0.1, 0.2, 0.3, 0.4])),
             0.9, None, None, None, None, None, 1)] + [
        (f"{root}/camA/clip.mp4", 9, when, d, max((x["conf"] for x in d), default=0.0), None,
         None, n, n / 10.0, 10.0, 1)
        for n, d in frames.items()
    ]  # fmt: skip
    run = {"detector": "/models/md_v5a.onnx", "detector_sha256": "ab" * 32, "threshold": 0.005}
    results = _results(spark, tmp_path / "det", root, run, job.DETECT_SCHEMA, rows, frames=True)
    places = tmp_path / "deployments.csv"
    places.write_text("deploymentID,latitude,longitude\ncamA,52.1,4.3\n")
    out = tmp_path / "package"
    summary = job.export(
        spark, str(results), str(out), deployments=str(places),
        metadata=str(_metadata(tmp_path / "metadata.json")), log=print,
    )  # fmt: skip
    assert summary["missing"] == []
    report = _validate(out)
    assert report.valid, report.flatten(["type", "note"])

    media = {m["filePath"]: m for m in _read(out, "media")}
    assert sorted(media) == ["camA/a.jpg", "camA/clip.mp4"]
    video = media["camA/clip.mp4"]
    assert video["fileMediatype"] == "video/mp4"
    assert video["timestamp"] == "2023-11-14T22:13:20Z"  # no EXIF: the committed file time
    assert video["mediaComments"] != ""
    seen = [o for o in _read(out, "observations") if o["mediaID"] == video["mediaID"]]
    media_level = sorted(
        (o["observationType"], float(o["classificationProbability"]),
         [float(o[k]) for k in ("bboxX", "bboxY", "bboxWidth", "bboxHeight")])
        for o in seen if o["observationLevel"] == "media"
    )  # fmt: skip
    # Per category the most confident detection of any frame: frame 10's animal and person.
    assert media_level == [("animal", 0.8, animal_at), ("human", 0.4, [0.5, 0.5, 0.1, 0.1])]

    # Classify results: the video's observation is its most confident frame's label.
    labels = {0: ("deer", 0.6), 10: ("fox", 0.9), 20: ("empty", 0.5)}
    top = [{"label": "fox", "probability": 0.7}]
    rows = [(f"{root}/camA/a.jpg", 1, when, "fox", 0.7, top, "fox", None, None, None, None,
             None, 1)] + [
        (f"{root}/camA/clip.mp4", 9, when, label, p, [{"label": label, "probability": p}], None,
         None, None, n, n / 10.0, 10.0, 1)
        for n, (label, p) in labels.items()
    ]  # fmt: skip
    run = {"model": "/models/model", "model_sha256": "12" * 32}
    results = _results(spark, tmp_path / "cls", root, run, job.SCHEMA, rows, frames=True)
    out = tmp_path / "cls-package"
    job.export(spark, str(results), str(out), deployments=str(places), log=print)
    media = {m["mediaID"]: m["filePath"] for m in _read(out, "media")}
    seen = [
        (o["observationType"], float(o["classificationProbability"]), o["observationTags"])
        for o in _read(out, "observations")
        if media.get(o["mediaID"]) == "camA/clip.mp4" and o["observationLevel"] == "media"
    ]
    assert seen == [("animal", 0.9, "label:fox")]


def test_two_stage_and_classify_results_export_species_bursts_and_one_row_per_photo(
    spark, survey, tmp_path
):
    root = job._qualified(spark, str(survey))
    fox = [{"label": "fox", "probability": 0.8}, {"label": "deer", "probability": 0.2}]
    # Two-stage: a's animal is a classified fox, its person is not classified; the run's bursts
    # (CCT sequences) put a and c in one event although they are 5 minutes apart.
    two_stage = []
    for relative in TAKEN:
        detections = [
            {"category": c, "label": label, "conf": conf, "bbox": box,
             "classifications": fox if label == "animal" and conf >= 0.3 else None}
            for c, label, conf, box in DETECTIONS[relative]
        ]  # fmt: skip
        burst = "s1" if relative in ("camA/a.jpg", "camA/c.jpg") else f"{root}/{relative}"
        two_stage.append(
            (f"{root}/{relative}", 1, _file_time(relative), "fox", 0.8, fox, "fox", detections,
             max((d["conf"] for d in detections), default=0.0), burst, None, 1)
        )  # fmt: skip
    run = {
        "model": "/models/crop-model", "model_sha256": "cd" * 32, "detector": "/models/md.onnx",
        "detector_sha256": "ef" * 32, "threshold": 0.3, "bursts": "cct",
    }  # fmt: skip
    results = _results(spark, tmp_path / "two", root, run, job.TWO_STAGE_SCHEMA, two_stage)
    taxa = tmp_path / "taxa.csv"
    taxa.write_text("label,scientificName,taxonRank\nfox,Vulpes vulpes,species\n")
    out = tmp_path / "two-dp"
    job.export(
        spark, str(results), str(out), taxa=str(taxa), log=print,
        deployments=str(_deployments_csv(tmp_path / "deployments.csv")),
        metadata=str(_metadata(tmp_path / "metadata.json")),
    )  # fmt: skip
    assert _validate(out).valid
    media = {m["mediaID"]: m["filePath"] for m in _read(out, "media")}
    placed = {m["filePath"]: m["deploymentID"] for m in _read(out, "media")}
    assert [placed[p] for p in ("camB/d.jpg", "camA/a.jpg", "f.jpg")] == ["B-02", "camA", "survey"]
    seen: dict[str, list[dict]] = {}
    for o in _read(out, "observations"):
        if o["observationLevel"] == "media":
            seen.setdefault(media[o["mediaID"]], []).append(o)
    # At the run's threshold 0.3: a: fox and person; b: two foxes; c: blank; d: vehicle; e:
    # blank; f: fox.
    assert {k: [o["observationType"] for o in v] for k, v in seen.items()} == {
        "camA/a.jpg": ["animal", "human"],
        "camA/b.jpg": ["animal", "animal"],
        "camA/c.jpg": ["blank"],
        "camB/d.jpg": ["vehicle"],
        "camB/e.jpg": ["blank"],
        "f.jpg": ["animal"],
    }
    a_fox = seen["camA/a.jpg"][0]
    assert (a_fox["scientificName"], float(a_fox["classificationProbability"])) == (
        "Vulpes vulpes",
        0.8,
    )
    assert "label:fox" in a_fox["observationTags"].split("|")
    assert a_fox["classifiedBy"].startswith("crop-model (sha256 cdcdcdcdcdcd)")
    assert seen["camA/a.jpg"][1]["scientificName"] == ""  # the person
    assert seen["camA/a.jpg"][0]["eventID"] == seen["camA/c.jpg"][0]["eventID"]
    assert seen["camA/a.jpg"][0]["eventEnd"] == "2024-05-01T10:05:00Z"  # UTC by default
    assert seen["camA/b.jpg"][0]["eventID"] != seen["camA/a.jpg"][0]["eventID"]
    descriptor = json.loads((out / "datapackage.json").read_text())
    assert descriptor["taxonomic"] == [{"scientificName": "Vulpes vulpes", "taxonRank": "species"}]

    # Classify results: one observation per photo, its class; 'empty' is a blank.
    labels = {"camA/a.jpg": "fox", "camA/c.jpg": "empty", "camB/e.jpg": "deer"}
    classify = [
        (f"{root}/{r}", 1, _file_time(r), labels.get(r, "fox"), 0.7, fox, "fox", None, None, 1)
        for r in TAKEN
    ]
    run = {"model": "/models/model", "model_sha256": "12" * 32}
    results = _results(spark, tmp_path / "cls", root, run, job.SCHEMA, classify)
    out = tmp_path / "cls-dp"
    summary = job.export(
        spark, str(results), str(out), deployments=str(tmp_path / "deployments.csv"), log=print
    )
    assert summary["media"] == len(TAKEN)
    rows = [o for o in _read(out, "observations") if o["observationLevel"] == "media"]
    media = {m["mediaID"]: m["filePath"] for m in _read(out, "media")}
    assert sorted((media[o["mediaID"]], o["observationType"]) for o in rows) == sorted(
        (r, "blank" if labels.get(r) == "empty" else "animal") for r in TAKEN
    )
    assert {o["bboxX"] for o in rows} == {""}
    assert all(float(o["classificationProbability"]) == 0.7 for o in rows)


def test_export_refuses_what_is_not_finished_results_and_a_used_out(
    spark, survey, tmp_path, capsys
):
    def export(predictions: Path, out: Path, *extra: str) -> str:
        args = ["export", "--format", "camtrap-dp", "--predictions", str(predictions)]
        assert cli.main([*args, "--out", str(out), *extra]) == 2
        said = capsys.readouterr().err.strip()
        assert len(said.splitlines()) == 1 and said.startswith("mmlspark-camera-trap export: ")
        return said

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    assert "not a results folder of this job" in export(plain, tmp_path / "o1")
    # A run that committed rows but has not finished (no results.json yet).
    root = job._qualified(spark, str(survey))
    folder = store.RunFolder(tmp_path / "unfinished")
    folder.start({"images": root, "bursts": "off", "detector": "/d.onnx"})
    staged = folder.staged("commit-00000001")
    spark.createDataFrame(
        [(f"{root}/f.jpg", 1, None, [], 0.0, None, None, None, None, None, 1)], job.DETECT_SCHEMA
    ).write.parquet(str(staged))
    folder.commit(staged, 1)
    assert "has not finished" in export(tmp_path / "unfinished", tmp_path / "o2")
    assert not (tmp_path / "o2").exists()
    # A used --out is refused, with --overwrite too when it holds anything but a package.
    assert "is not empty" in export(tmp_path / "unfinished", plain)
    assert "files an export does not write" in export(tmp_path / "unfinished", plain, "--overwrite")
    assert (plain / "notes.txt").read_text() == "mine"
    # A locked results folder (a run in progress) is refused.
    with store.OutputLock(tmp_path / "unfinished"):
        assert "in use by another run" in export(tmp_path / "unfinished", tmp_path / "o3")
    assert os.listdir(plain) == ["notes.txt"]
