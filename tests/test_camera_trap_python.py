"""The camera-trap job without the jar: on a Spark Connect server started without it (the Python
backend, as on serverless and shared compute), checked against the same job run with the jar; and
its pieces (listing, reading, EXIF times, metrics) against their JVM twins."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import connect_mode
from image_fixtures import encode, pattern, with_exif_datetime

from mmlspark.apps.camera_trap import __main__ as cli
from mmlspark.apps.camera_trap import job
from mmlspark.image import ImageDecoder, list_files, read_files


def _predictions(folder: Path) -> dict[str, dict[str, str]]:
    with (folder / "predictions.csv").open() as f:
        return {r["path"]: r for r in csv.DictReader(f)}


def _same_predictions(got: dict[str, dict], expected: dict[str, dict], tolerance: float) -> None:
    assert got.keys() == expected.keys()
    for path, e in expected.items():
        g = got[path]
        assert (g["predicted_label"], g["failure"]) == (e["predicted_label"], e["failure"]), path
        assert abs(float(g["confidence"]) - float(e["confidence"])) <= tolerance, (path, g, e)


def _same_detections(got: Path, expected: Path) -> None:
    """The results.json of two runs: the same photos, failures and detections (category, label,
    confidence and box to 1e-4, the format's rounding)."""
    g = {e["file"]: e for e in json.loads((got / "results.json").read_text())["images"]}
    e = {e["file"]: e for e in json.loads((expected / "results.json").read_text())["images"]}
    assert g.keys() == e.keys()
    for name, want in e.items():
        have = g[name]
        assert have.get("failure") == want.get("failure"), name
        boxes, wanted = have.get("detections") or [], want.get("detections") or []
        assert [d["category"] for d in boxes] == [d["category"] for d in wanted], name
        for a, b in zip(boxes, wanted, strict=True):
            assert a["conf"] == pytest.approx(b["conf"], abs=2e-4), name
            assert a["bbox"] == pytest.approx(b["bbox"], abs=2e-4), name


def _survey(root: Path) -> dict[str, bytes]:
    """A small survey: photos in two folders, a PNG, a file that is no image, a truncated JPEG."""
    files = {
        "cam1/a.jpg": encode(pattern(48, 64, seed=1), ".jpg"),
        "cam1/b.png": encode(pattern(40, 30, seed=2), ".png"),
        "cam2/c.jpg": encode(pattern(64, 64, seed=3), ".jpg"),
        "cam2/notes.txt": b"not an image",
        "cam2/cut.jpg": encode(pattern(32, 32, seed=4), ".jpg")[:200],
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def _rows(df) -> dict[str, tuple]:
    out = {}
    for r in df.collect():
        image = None if r.image is None else (r.image.height, r.image.width, bytes(r.image.data))
        out[r.path] = (r.length, r.modificationTime, image, r.error)
    return out


def test_listing_and_reading_on_python_equal_the_jars(spark, tmp_path):
    """list_files and read_files on the Python backend: the same rows, images and errors as the
    jar's listing and reader, a listing's error kept, a vanished file given its reason."""
    root = tmp_path / "survey"
    _survey(root)
    qualified = job._qualified(spark, str(root))
    assert qualified == "file:" + str(root)
    decoder = ImageDecoder(minHeight=16, minWidth=16)
    jvm_listing = list_files(spark, qualified, backend="jvm")
    python_listing = list_files(spark, qualified, backend="python")
    assert (
        python_listing.columns
        == jvm_listing.columns
        == [
            "path",
            "length",
            "modificationTime",
            "error",
        ]
    )
    assert python_listing.collect() == jvm_listing.collect()
    # The same listing (with a file that vanished and a row the listing failed) read by both.
    listing = jvm_listing.union(
        spark.createDataFrame(
            [(qualified + "/cam1/gone.jpg", 10, None, None), (qualified + "/x", 0, None, "loop")],
            jvm_listing.schema,
        )
    )
    expected = _rows(read_files(listing, decoder.copy().setBackend("jvm")))
    got_df = read_files(listing, decoder.copy().setBackend("python"))
    assert got_df.columns == ["path", "length", "modificationTime", "image", "error"]
    got = _rows(got_df)
    assert got == expected
    assert got[qualified + "/cam1/gone.jpg"][3] == (
        "cannot read the file: no such file (removed while reading?)"
    )
    assert got[qualified + "/x"][3] == "loop"
    assert got[qualified + "/cam1/a.jpg"][2][:2] == (24, 32)  # decoded at 1/2: covers 16x16
    assert "truncated JPEG" in got[qualified + "/cam2/cut.jpg"][3]


def test_python_reads_local_and_mounted_paths_only_and_keeps_the_file_limit(spark, tmp_path):
    from mmlspark._engine import files as engine_files

    photo = tmp_path / "a b%.jpg"
    photo.write_bytes(encode(pattern(8, 8), ".jpg"))
    assert engine_files.local_file("file://" + str(photo)) == str(photo)
    assert engine_files.local_file(
        "file:" + str(photo).replace(" ", "%20").replace("%.", "%25.")
    ) == str(photo)
    assert engine_files.local_file("dbfs:/Volumes/cat/db/vol/x.jpg") == "/Volumes/cat/db/vol/x.jpg"
    assert engine_files.local_file("dbfs:/mnt/x.jpg") == "/dbfs/mnt/x.jpg"
    with pytest.raises(engine_files.RowError, match="not s3a: paths"):
        engine_files.local_file("s3a://bucket/x.jpg")
    with pytest.raises(engine_files.RowError, match=r"file is 0\.0 MB, over the limit of 0\.0 MB"):
        engine_files.read_file(str(photo), 10)
    listing = spark.createDataFrame(
        [("file:" + str(photo), 1, None, None), ("s3a://bucket/x.jpg", 1, None, None)],
        "path string, length long, modificationTime timestamp, error string",
    )
    spark.conf.set(engine_files.MAX_FILE_BYTES_KEY, "64")
    try:
        rows = {
            r.path: r.error
            for r in read_files(listing, ImageDecoder().setBackend("python")).collect()
        }
    finally:
        spark.conf.unset(engine_files.MAX_FILE_BYTES_KEY)
    assert "over the limit of 0.0 MB per file" in rows["file:" + str(photo)]
    assert "spark.mmlspark.image.maxFileBytes" in rows["file:" + str(photo)]
    assert "the Python backend reads local and mounted paths" in rows["s3a://bucket/x.jpg"]


def test_exif_times_on_python_equal_the_jars(spark, tmp_path):
    from mmlspark._engine.headers import exif_seconds
    from mmlspark.apps.camera_trap import _jvm
    from mmlspark.image import taken_times

    jpeg = encode(np.full((16, 16, 3), 90, np.uint8), ".jpg")
    (tmp_path / "a.jpg").write_bytes(with_exif_datetime(jpeg, "2024:05:01 10:00:02"))
    (tmp_path / "b.jpg").write_bytes(with_exif_datetime(jpeg, "2024:13:01 10:00:02"))  # no month
    (tmp_path / "c.jpg").write_bytes(jpeg)
    (tmp_path / "d.png").write_bytes(encode(np.zeros((8, 8, 3), np.uint8), ".png"))
    listing = list_files(spark, "file:" + str(tmp_path), backend="jvm")
    listing = listing.union(
        spark.createDataFrame([("file:/no/such.jpg", 0, None, None)], listing.schema)
    )
    expected = {r.path: r.t for r in _jvm.taken_times(listing, "t").collect()}
    got = {r.path: r.t for r in taken_times(listing, "t").collect()}
    assert got == expected
    assert got["file:" + str(tmp_path / "a.jpg")] == 1714557602.0  # 2024-05-01 10:00:02 as UTC
    assert sum(v is not None for v in got.values()) == 1
    assert exif_seconds(b"\xff\xd8\xff") is None


def test_class_metrics_equal_compute_model_statistics(spark):
    from mmlspark.train import ComputeModelStatistics

    pairs = [("deer", "deer")] * 5 + [("deer", "fox")] * 2 + [("fox", "fox")] * 3
    pairs += [("empty", "deer"), ("fox", "bear")]
    judged = spark.createDataFrame(pairs, "label string, prediction string")
    got = job.class_metrics(judged, "label", "prediction")
    stats = ComputeModelStatistics(labelCol="label", predictionCol="prediction").transform(judged)
    e = stats.first()
    assert got["labels"] == e.labels == ["bear", "deer", "empty", "fox"]
    assert got["accuracy"] == pytest.approx(e.accuracy)
    assert list(got["precision_per_class"].values()) == pytest.approx(e.precision_per_class)
    assert list(got["recall_per_class"].values()) == pytest.approx(e.recall_per_class)
    assert got["confusion_matrix"] == [list(map(int, row)) for row in e.confusion_matrix]


def test_cli_takes_a_backend_and_a_connect_url():
    args = cli.parser().parse_args(["--backend", "python", "--remote", "sc://h:1", "demo"])
    assert (args.backend, args.remote, args.command) == ("python", "sc://h:1", "demo")
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--backend", "gpu", "demo"])


def test_relative_paths_are_made_absolute_without_the_jar(
    spark, python_backend, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert job._qualified(spark, "photos/") == f"file:{tmp_path}/photos"
    assert job._qualified(spark, "s3a://b/photos/") == "s3a://b/photos"


def test_read_images_on_python_spreads_the_files_over_whole_waves_of_tasks(spark, tmp_path):
    """Spark's binaryFile source puts as many files in a partition as its byte budget allows
    (here three of 32 of 96 small files: two cores would run the last wave half idle; with a
    small ``maxPartitionBytes``, one file each, and each task's Python worker start would cost
    more than its file); the Python backend's read_images reads its listing spread evenly over
    whole waves of tasks of about FILES_PER_TASK files, and its workers read the files."""
    from pyspark.sql import functions as F

    from mmlspark.image import functions, read_images

    jpeg = encode(pattern(8, 8), ".jpg")
    for i in range(96):
        (tmp_path / f"{i:03d}.jpg").write_bytes(jpeg)

    def partition_sizes(df):
        return sorted(r["count"] for r in df.groupBy(F.spark_partition_id()).count().collect())

    source = spark.read.format("binaryFile").load(str(tmp_path))
    assert source.rdd.getNumPartitions() == 3
    assert partition_sizes(source) == [32, 32, 32]
    assert functions.FILES_PER_TASK == 64  # 96 files on 2 cores: one wave of two tasks
    photos = read_images(spark, str(tmp_path), backend="python")
    assert photos.columns == ["path", "image", "error"]
    assert partition_sizes(photos) == [48, 48]
    assert photos.filter("error IS NULL AND image.height = 8").count() == 96
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1")
    try:
        assert spark.read.format("binaryFile").load(str(tmp_path)).rdd.getNumPartitions() == 96
        # The partitions of one file each are merged, without a shuffle (whose map side would
        # run a task per file).
        photos = read_images(spark, str(tmp_path), backend="python")
        assert partition_sizes(photos) == [48, 48]
        plan = photos._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "Coalesce" in plan, plan
        for i in range(96, 300):
            (tmp_path / f"{i:03d}.jpg").write_bytes(jpeg)
        # 300 files: ceil(300 / (2 * 64)) = 3 waves of two tasks
        assert partition_sizes(read_images(spark, str(tmp_path), backend="python")) == [50] * 6
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_default_parallelism_over_connect_is_the_servers(jarless_connect):
    from mmlspark.core.session import default_parallelism

    with connect_mode():
        assert default_parallelism(jarless_connect) == 2  # the server runs local[2]
