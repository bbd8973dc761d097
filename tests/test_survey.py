"""A survey is never lost: the camera-trap job against hostile input, interrupts, concurrent
runs and folders it must not touch. Bombs are made here in a few bytes, never stored."""

from __future__ import annotations

import csv
import errno
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from mmlspark.apps.camera_trap import __main__ as cli
from mmlspark.apps.camera_trap import job, store
from mmlspark.image import read_images

ROOT = Path(__file__).resolve().parent.parent
DEMO = job.DEMO_DATA


def jpeg_claiming(width: int, height: int) -> bytes:
    """A small valid JPEG whose frame header is rewritten to claim `width` x `height`."""
    ok, encoded = cv2.imencode(".jpg", np.full((16, 16, 3), 90, np.uint8))
    assert ok
    data = bytearray(encoded.tobytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def blank_png(width: int, height: int) -> bytes:
    """A valid all-black RGB PNG, compressed row by row (no full-size buffer in this process)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    compressor = zlib.compressobj(9)
    row = b"\x00" * (1 + 3 * width)
    idat = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def copy_photos(target: Path, copies: int = 1, per_label: int | None = None) -> list[Path]:
    photos = []
    for k in range(copies):
        for label in ("deer", "fox", "empty"):
            for photo in sorted((DEMO / "images" / label).glob("*.jpg"))[:per_label]:
                destination = target / f"g{k:02d}" / label / photo.name
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(photo, destination)
                photos.append(destination)
    return photos


@pytest.fixture
def model(demo_model) -> Path:
    return demo_model


def rows_of(out: Path) -> list[dict]:
    return list(csv.DictReader((out / "predictions.csv").open(newline="")))


def committed_rows(out: Path) -> dict[str, tuple]:
    """The current committed row of each photo, read without Spark."""
    parts = sorted((out / store.TABLE).glob("part-*.parquet"))
    if not parts:
        return {}
    table = pq.ParquetDataset([str(p) for p in parts]).read().to_pylist()
    latest: dict[str, dict] = {}
    for r in table:
        if r["path"] not in latest or r["commit"] > latest[r["path"]]["commit"]:
            latest[r["path"]] = r
    return {p: (r["predicted_label"], r["confidence"], r["failure"]) for p, r in latest.items()}


def same(a: tuple, b: tuple) -> bool:
    """Two committed rows agree: label and failure equal, confidence within rel 1e-6."""
    (label, confidence, failure), (label2, confidence2, failure2) = a, b
    if (label, failure) != (label2, failure2) or (confidence is None) != (confidence2 is None):
        return False
    return confidence is None or abs(confidence - confidence2) <= 1e-6 * abs(confidence2)


def commit_numbers(out: Path) -> set[int]:
    """The commits whose rows are in the committed table, read without Spark."""
    parts = sorted((out / store.TABLE).glob("part-*.parquet"))
    if not parts:
        return set()
    return set(
        pq.ParquetDataset([str(p) for p in parts]).read(columns=["commit"])["commit"].to_pylist()
    )


def classify_args(images: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return ["classify", "--images", str(images), "--model", str(model), "--out", str(out), *extra]


def start_cli(args: list[str], tmp_path: Path) -> subprocess.Popen:
    """The CLI in a process of its own (its own local JVM, the default settings); what it prints
    goes to a log file (a pipe nobody reads could fill and stall it), read by `finish`."""
    log = tmp_path / f"cli-{time.monotonic_ns()}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "mmlspark.apps.camera_trap", "--master", "local[2]", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    process.log = log  # type: ignore[attr-defined]
    return process


def finish(process: subprocess.Popen, timeout: float = 600) -> str:
    """Waits for the CLI and returns what it printed."""
    process.wait(timeout=timeout)
    return process.log.read_text()  # type: ignore[attr-defined,no-any-return]


def wait_for(condition, timeout: float = 300.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# -- never delete what it did not write -----------------------------------------------------


def test_overwrite_and_demo_remove_only_their_own_files(spark, model, tmp_path, capsys):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=4)
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    (out / "thesis.docx").write_text("years of work")
    (out / store.TABLE / "notes.txt").write_text("mine")
    assert cli.main(classify_args(images, model, out, "--overwrite")) == 0
    assert (out / "thesis.docx").read_text() == "years of work"
    assert (out / store.TABLE / "notes.txt").read_text() == "mine"
    assert len(rows_of(out)) == len(photos)

    # --out equal to, inside or around --images: refused, the photos untouched.
    for target in (images, images / "g00", tmp_path):
        assert cli.main(classify_args(images, model, target, "--overwrite")) == 2
        assert "overlap" in capsys.readouterr().err
    assert all(p.is_file() for p in photos)

    # A folder this job did not write: refused, and the message suggests no deleting flag.
    foreign = tmp_path / "documents"
    foreign.mkdir()
    (foreign / "report.txt").write_text("x")
    assert cli.main(classify_args(images, model, foreign)) == 2
    err = capsys.readouterr().err
    assert "not a results folder of this job" in err and "report.txt" in err
    assert "--overwrite" not in err
    assert cli.main(classify_args(images, model, foreign, "--overwrite")) == 2
    assert (foreign / "report.txt").read_text() == "x"

    # --out naming a file, and a CCT file nested too deeply: exit 2, no traceback.
    assert cli.main(classify_args(images, model, foreign / "report.txt")) == 2
    assert "is a file" in capsys.readouterr().err
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    args = classify_args(images, model, tmp_path / "r2", "--bursts", "cct", "--cct")
    assert cli.main([*args, str(tmp_path / "deep.json")]) == 2
    assert "nested too deeply" in capsys.readouterr().err

    # demo refuses a folder that is not a demo output, and clears only its own files.
    thesis = tmp_path / "d"
    thesis.mkdir()
    (thesis / "thesis.docx").write_text("x")
    assert cli.main(["demo", "--out", str(thesis)]) == 2
    assert (thesis / "thesis.docx").read_text() == "x"
    assert "not a demo output" in capsys.readouterr().err
    demo = tmp_path / "demo"
    job.DemoFiles(demo).add_tree(demo)  # an empty demo output
    (demo / "model").mkdir()
    (demo / "model" / "keep.txt").write_text("k")
    listed = demo / "data" / "old.jpg"
    listed.parent.mkdir()
    listed.write_text("old")
    job.DemoFiles(demo).add(listed)
    job.DemoFiles(demo)  # a new demo run starts: the listed file goes, the other stays
    assert not listed.exists() and (demo / "model" / "keep.txt").read_text() == "k"

    # train never replaces a folder that is not a saved model.
    code = cli.main(["train", "--images", str(images), "--featurizer",
                     str(DEMO / "featurizer.onnx"), "--model-out", str(foreign)])  # fmt: skip
    assert code == 2 and (foreign / "report.txt").exists()


def test_cct_annotations_of_missing_images_are_left_out(tmp_path):
    cct = {
        "images": [{"id": 1, "file_name": "a.jpg"}],
        "annotations": [{"image_id": 1, "category_id": 0}, {"image_id": 99, "category_id": 0}],
        "categories": [{"id": 0, "name": "empty"}],
    }
    (tmp_path / "cct.json").write_text(json.dumps(cct))
    labels = job.CctLabels.read(str(tmp_path / "cct.json"))
    assert labels.labels == {"a.jpg": "empty"} and labels.dangling == 1


def test_cct_labels_join_keeps_the_photos_partitions(spark, tmp_path):
    # A shuffle join left the photos in spark.sql.shuffle.partitions (200) pieces, which every
    # training iteration then scanned: train --labels ran 5x slower than folder labels.
    cct = {
        "images": [{"id": i, "file_name": f"cam/{i}.jpg"} for i in range(40)],
        "annotations": [{"image_id": i, "category_id": i % 2} for i in range(40)],
        "categories": [{"id": 0, "name": "empty"}, {"id": 1, "name": "deer"}],
    }
    (tmp_path / "cct.json").write_text(json.dumps(cct))
    root = f"file:{tmp_path}/survey"
    photos = spark.createDataFrame(
        [(f"{root}/cam/{i}.jpg",) for i in range(50)], "path string"
    ).repartition(3)
    labeled = job.with_labels(spark, photos, str(tmp_path / "survey"), str(tmp_path / "cct.json"))
    assert labeled.rdd.getNumPartitions() == 3
    got = {r.relative_path: r.label for r in labeled.collect()}
    labels = ["empty", "deer"]
    assert got == {f"cam/{i}.jpg": (labels[i % 2] if i < 40 else None) for i in range(50)}


# -- one file never kills a run -------------------------------------------------------------


def test_a_hostile_survey_completes_and_lists_every_file(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=14)[:40]
    for extra in copy_photos(images, per_label=14)[40:]:
        extra.unlink()
    bombs = images / "bombs"
    bombs.mkdir()
    bomb = jpeg_claiming(25000, 25000)
    assert len(bomb) < 1000
    (bombs / "claims_25000.jpg").write_bytes(bomb)
    png = blank_png(10000, 10000)
    assert len(png) < 400_000
    (bombs / "blank_10000.png").write_bytes(png)
    (bombs / "empty.jpg").write_bytes(b"")
    (bombs / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    rows = {r["path"]: r for r in rows_of(out)}
    assert len(rows) == 44
    assert all(rows[str(p.relative_to(images))]["predicted_label"] for p in photos)
    assert "empty file (0 bytes)" in rows["bombs/empty.jpg"]["failure"]
    assert "broken symbolic link" in rows["bombs/gone.jpg"]["failure"]
    # The 25000x25000 claim in under 1000 bytes: at 1/8 scale under the limit, and a failure row
    # all the same (its image data is far too short for its frame), never a label.
    assert rows["bombs/claims_25000.jpg"]["failure"].startswith("corrupt JPEG: ")
    # Over the pixel limit at full size, a PNG is read subsampled to the featurizer's size.
    assert rows["bombs/blank_10000.png"]["predicted_label"]
    assert not rows["bombs/blank_10000.png"]["failure"]
    results = json.loads((out / "results.json").read_text())
    assert len(results["images"]) == 44

    # read_images decodes at full size: the 25000x25000 claim is refused from its header.
    df = read_images(spark, str(bombs)).drop("image").collect()
    errors = {Path(r.path).name: r.error for r in df}
    assert len(errors) == 4
    assert "25000x25000 (625.0 MP), over the limit" in errors["claims_25000.jpg"]
    assert "spark.mmlspark.image.maxPixels" in errors["claims_25000.jpg"]


def test_read_images_lists_links_loops_and_duplicates_once(spark, tmp_path):
    root = tmp_path / "photos"
    copy_photos(root, per_label=2)
    (root / "g00" / "deer" / "loop").symlink_to(root / "g00")  # back to a folder above
    (root / "zz_again").symlink_to(root / "g00" / "fox")  # the same photos by a second path
    (root / "g00" / "dangling.jpg").symlink_to(root / "missing.jpg")
    rows = read_images(spark, str(root)).drop("image").collect()
    paths = [r.path for r in rows]
    assert len(paths) == len(set(paths)) == 6 + 2
    loops = [r for r in rows if r.error and "symbolic link loop" in r.error]
    assert len(loops) == 1 and loops[0].path.endswith("g00/deer/loop")
    assert not any("/zz_again/" in p for p in paths)  # each photo once, under its first path
    assert sum("/g00/fox/" in p for p in paths) == 2
    assert any(r.error and "broken symbolic link" in r.error for r in rows)


@pytest.mark.system
def test_unreadable_files_and_folders_are_row_errors(tmp_path):
    """Permission denied, as a user without root's override gets it: the check runs in a user
    namespace, where files owned by root get no override."""
    root = tmp_path / "photos"
    copy_photos(root, per_label=1)
    secret = root / "g00" / "deer" / "secret.jpg"
    shutil.copyfile(next((DEMO / "images" / "deer").glob("*.jpg")), secret)
    secret.chmod(0)
    locked = root / "locked"
    locked.mkdir()
    (locked / "x.jpg").write_bytes(b"x")
    locked.chmod(0)
    script = (
        "import json, sys, mmlspark\n"
        "from mmlspark.image import read_images\n"
        "spark = mmlspark.session('local[2]', {'spark.ui.enabled': 'false'})\n"
        "rows = read_images(spark, sys.argv[1]).drop('image').collect()\n"
        "print(json.dumps({r.path.rsplit('/', 1)[-1]: r.error for r in rows}))\n"
    )
    try:
        result = subprocess.run(
            ["unshare", "--user", sys.executable, "-c", script, str(root)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert errors["secret.jpg"] == "cannot read the file: permission denied"
    assert errors["locked"] == "cannot list folder: permission denied"
    assert sum(e is None for e in errors.values()) == 3


# -- resume that survives anything ----------------------------------------------------------


@pytest.mark.system
def test_interrupted_runs_resume_to_exactly_one_row_per_photo(spark, model, tmp_path):
    images = tmp_path / "survey"
    # 300 photos in commits of at most 25: the same number of commits before each signal as
    # 6,000 photos in commits of 500, a twentieth of the scoring.
    photos = copy_photos(images, copies=5, per_label=20)
    assert len(photos) == 300
    reference = tmp_path / "reference"
    job.classify(spark, str(images), str(model), str(reference), log=print)
    expected = committed_rows(reference)
    assert len(expected) == 300

    out = tmp_path / "run"
    args = classify_args(images, model, out, "--commit-every", "25")
    kept = []
    for sig in (signal.SIGINT, signal.SIGKILL):
        before = len(committed_rows(out))
        commits_before = commit_numbers(out)
        feed = tmp_path / f"progress-{sig.name}.jsonl"
        process = start_cli([*args, "--progress-json", str(feed)], tmp_path)
        wait_for(lambda b=before: len(committed_rows(out)) >= b + 50, what="two commits")
        at_signal = len(committed_rows(out))
        process.send_signal(sig)
        output = finish(process, timeout=300)
        if sig == signal.SIGINT:
            # Prompt: the run stops within the commit it was scoring (its job is cancelled, or
            # it had just finished), however slow the machine.
            assert len(committed_rows(out)) <= at_signal + 25, output[-3000:]
            assert process.returncode == 128 + signal.SIGINT, output[-3000:]
            assert "run the same command to continue" in output
            assert "Traceback" not in output and "py4j" not in output.lower(), output[-3000:]
            # A console people can read: the job's lines, no Spark stage bar or warning, nothing
            # the JVM prints itself (package resolution, its own warnings) before the first.
            assert "[Stage" not in output and not re.search(r"\bWARN\b", output), output[-3000:]
            assert output.lstrip().startswith("[classify] "), output[:3000]
            assert "WARNING" not in output and ":: " not in output, output[:3000]
            assert f"[classify] {300 - before} photos to score" in output, output[-3000:]
            assert re.search(r"\[classify\] \d+/300 photos \(\d+%\), [\d.]+ photos/s", output)
            # and a feed a GUI can read: one JSON object per commit this run made
            entries = [json.loads(line) for line in feed.read_text().splitlines()]
            landed = commit_numbers(out) - commits_before
            assert len(entries) == len(landed) > 0, (entries, landed)
            assert entries[-1]["photos_done"] == len(committed_rows(out)) - before
            assert all(e["photos_total"] == 300 - before for e in entries)
            assert [e["commit"] for e in entries] == list(range(1, len(entries) + 1))
        else:
            assert process.returncode == -signal.SIGKILL
        rows = committed_rows(out)
        assert len(rows) >= before + 50 and len(rows) < 300
        assert all(same(rows[p], expected[p]) for p in rows)  # whole commits, right values
        kept.append(len(rows))
    print(f"rows kept: {kept[0]} after SIGINT, {kept[1]} after SIGKILL")

    # The run that finishes the job needs no process of its own: the same command in this one.
    assert cli.main(args) == 0
    rows = committed_rows(out)
    assert rows.keys() == expected.keys()
    assert all(same(rows[p], expected[p]) for p in rows)
    parts = list((out / store.TABLE).glob("part-*.parquet"))
    table = pq.ParquetDataset([str(p) for p in parts]).read()
    assert table.num_rows == 300 and len(parts) == 1  # exactly one row a photo, one file
    assert len(rows_of(out)) == 300
    assert not (out / store.STAGING).exists() or not any((out / store.STAGING).iterdir())
    assert not (out / store.INFLIGHT).exists()
    with store.OutputLock(out):  # released: the kernel lock went with the process
        pass


def test_a_photo_the_process_died_on_twice_is_a_failure_not_a_third_crash(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=3)
    out = tmp_path / "run"
    folder = store.RunFolder(out)
    run = {
        "images": job._qualified(spark, str(images)),
        "model": str(model),
        "model_sha256": store.content_hash(model),
        "bursts": "off",
    }
    folder.start(run)
    poison = f"file:{photos[4]}"
    folder.set_inflight([poison], level=2)  # what a run that saw its JVM die on one photo leaves
    folder.mark_died()
    assert cli.main(classify_args(images, model, out)) == 0
    rows = {r["path"]: r for r in rows_of(out)}
    assert len(rows) == len(photos)
    failure = rows[str(photos[4].relative_to(images))]["failure"]
    assert "the process died while scoring this file alone" in failure
    assert sum(bool(r["failure"]) for r in rows.values()) == 1
    assert not (out / store.INFLIGHT).exists()

    # A run that died on a whole commit: those photos are scored first, in parts, and normally.
    again = tmp_path / "again"
    folder = store.RunFolder(again)
    folder.start(run)
    folder.set_inflight([f"file:{p}" for p in photos[:5]], level=0)
    folder.mark_died()
    lines: list[str] = []
    job.classify(spark, str(images), str(model), str(again), log=lines.append)
    assert any("scoring them in smaller parts first" in line for line in lines)
    assert committed_rows(again) == committed_rows(out) | {poison: committed_rows(again)[poison]}
    assert committed_rows(again)[poison][2] is None


FULL_DISK = """
import shutil, subprocess, sys
from pathlib import Path
from mmlspark.apps.camera_trap import __main__ as cli

snapshots, out, table, args = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
print("FIRST CODE", cli.main(args))
shutil.copytree(out / table, snapshots / "first" / table)
subprocess.run(["mount", "-o", "remount,size=64m", str(out)], check=True)
print("SECOND CODE", cli.main(args))
shutil.copytree(out, snapshots / "out")
"""


@pytest.mark.system
def test_a_full_disk_keeps_the_commits_and_the_next_run_finishes(model, tmp_path):
    """--out on a 256 KiB filesystem (a tmpfs in a user and mount namespace of this test's own):
    the run stops with exit 2 and what to do, keeps its commits, and after the filesystem grows
    the same command finishes with one row per photo (in the same process, as a notebook user
    runs it again)."""
    images = tmp_path / "survey"
    photos = copy_photos(images, copies=5)
    out, snapshots = tmp_path / "small", tmp_path / "snapshots"
    out.mkdir()
    snapshots.mkdir()
    args = ["--master", "local[2]", *classify_args(images, model, out, "--commit-every", "50")]
    runner = tmp_path / "full_disk.py"
    runner.write_text(FULL_DISK)
    script = f"""
        mount -t tmpfs -o size=256k tmpfs {out}
        {sys.executable} -u {runner} {snapshots} {out} {store.TABLE} {" ".join(args)} 2>&1
    """
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout
    assert result.returncode == 0, (output + result.stderr)[-3000:]
    first, after = output.split("FIRST CODE ", 1)
    code, second = after.split("\n", 1)
    assert code == "2", first[-3000:]
    assert "no space left on device" in first and "run the same command to continue" in first
    assert "Traceback" not in output, output[-3000:]
    kept = committed_rows(snapshots / "first")
    assert 0 < len(kept) <= len(photos)  # commits made before the disk filled are kept
    assert second.split("SECOND CODE ", 1)[1].startswith("0\n"), second[-3000:]
    rows = committed_rows(snapshots / "out")
    assert len(rows) == len(photos) and all(rows[p] == kept[p] for p in kept)
    assert len(rows_of(snapshots / "out")) == len(photos)


def test_changed_and_deleted_photos_are_rescored_and_dropped(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=3)
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    first = {r["path"]: r for r in rows_of(out)}
    changed, deleted = photos[0], photos[-1]  # a deer becomes a fox; an empty photo is removed
    shutil.copyfile(photos[3], changed)
    os.utime(changed, (time.time() + 10,) * 2)
    deleted.unlink()
    lines: list[str] = []
    summary = job.classify(spark, str(images), str(model), str(out), log=lines.append)
    # The deleted photo's row is kept (counted as missing) until --prune-missing drops it.
    assert summary["scored"] == 1 and summary["missing"] == 1 and summary["removed"] == 0, lines
    assert {r["path"] for r in rows_of(out)} == set(first)
    settings = job.ClassifySettings(prune_missing=True)
    summary = job.classify(spark, str(images), str(model), str(out), settings=settings)
    assert summary["scored"] == 0 and summary["removed"] == 1 and summary["missing"] == 0
    after = {r["path"]: r for r in rows_of(out)}
    name = str(changed.relative_to(images))
    assert set(after) == set(first) - {str(deleted.relative_to(images))}
    assert (
        after[name]["predicted_label"]
        == first[str(photos[3].relative_to(images))]["predicted_label"]
    )
    assert len(committed_rows(out)) == len(photos) - 1
    assert (
        pq.ParquetDataset([str(p) for p in (out / store.TABLE).glob("part-*.parquet")])
        .read()
        .num_rows
        == len(photos) - 1
    )


@pytest.mark.system
def test_concurrent_runs_are_refused_or_wait(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, copies=2)
    out = tmp_path / "run"
    processes = [start_cli(classify_args(images, model, out), tmp_path) for _ in range(2)]
    outputs = [finish(p) for p in processes]
    codes = sorted(p.returncode for p in processes)
    assert codes == [0, 2], outputs
    assert any("in use by another run of this job" in o for o in outputs)
    assert len(rows_of(out)) == len(photos) and len(committed_rows(out)) == len(photos)

    # --wait: waits for the holder to let go, then runs.
    other = tmp_path / "run2"
    other.mkdir()
    done = threading.Event()
    with store.OutputLock(other):
        waiter = threading.Thread(
            target=lambda: (
                done.set() if cli.main(classify_args(images, model, other, "--wait")) == 0 else None
            )
        )
        waiter.start()
        time.sleep(3)
        assert not done.is_set() and not (other / store.MANIFEST).exists()
    waiter.join(timeout=600)
    assert done.is_set() and len(rows_of(other)) == len(photos)

    # A lock file a process that no longer exists wrote: no process holds its OS lock.
    (other / store.LOCK).write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 7}))
    assert cli.main(classify_args(images, model, other)) == 0


# -- survey scale ---------------------------------------------------------------------------


def test_a_large_survey_is_written_in_few_files_with_bounded_driver_memory(
    spark, tmp_path, monkeypatch
):
    """200,000 rows with the rows-per-file setting scaled down as much (20,000 instead of
    100,000): the code paths of a million-photo survey (250 commits compacted, every output
    written from the executors) at a fifth of the rows."""
    import tracemalloc

    from pyspark.sql import functions as F

    n = 200_000
    monkeypatch.setattr("mmlspark.apps.camera_trap.run_loop.ROWS_PER_FILE", n // 10)
    folder = store.RunFolder(tmp_path / "run")
    folder.start({"images": "file:/survey"})
    photos = spark.range(n).select(
        F.format_string("file:/survey/cam%03d/IMG_%07d.JPG", F.col("id") % 400, "id").alias("path"),
        F.lit(3_000_000).cast("long").alias("length"),
        F.current_timestamp().alias("modificationTime"),
        F.when(F.col("id") % 3 == 0, "deer").otherwise("empty").alias("predicted_label"),
        (F.col("id") % 1000 / 1000.0).alias("confidence"),
        F.array(F.struct(F.lit("deer").alias("label"), F.lit(0.6).alias("probability"))).alias(
            "top_k"
        ),
        F.lit("deer").alias("image_label"),
        F.lit(None).cast("string").alias("burst"),
        F.when(F.col("id") % 1000 == 7, "not a decodable image").alias("failure"),
        (F.col("id") % 250).cast("int").alias("commit"),
    )
    # 250 commits of 800 photos, as a run committing every 800 would leave them.
    for k, part in enumerate(range(0, 250, 25)):
        staged = folder.staged("test")
        photos.filter(F.col("commit").between(part, part + 24)).repartition(25).write.parquet(
            str(staged)
        )
        folder.commit(staged, k + 1)
    assert len(folder.parts()) == 250
    listing = photos.select("path")
    tracemalloc.start()
    levels = ["deer", "empty"]

    def outputs(spark, rows, folder, videos):
        job.write_outputs(spark, rows, folder, levels, "file:/survey", ordered=True, videos=videos)

    summary = job.finish(spark, folder, listing, outputs, log=print)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert summary["photos"] == n and summary["failures"] == n // 1000
    assert len(folder.parts()) <= 10
    assert peak < 16 * 2**20, f"driver peak {peak / 2**20:.0f} MiB"
    print(f"{n} rows: {len(folder.parts())} files, driver Python peak {peak / 2**20:.1f} MiB")
    with (folder.folder / "predictions.csv").open() as f:
        assert sum(1 for _ in f) == n + 1
    with (folder.folder / "results.json").open() as f:
        entries = [line for line in f if line.startswith(' {"file"')]
    assert len(entries) == n
    assert json.loads(entries[0].rstrip().rstrip(","))["file"] == "cam000/IMG_0000000.JPG"
    # Sorted by name: each of the 400 cameras holds n / 400 photos, and photo 7 is a failure.
    assert (
        json.loads(entries[7 * (n // 400)].rstrip().rstrip(","))["failure"]
        == "not a decodable image"
    )


def test_the_end_of_a_run_computes_its_current_rows_once(spark, tmp_path):
    """`finish` (the table compacted, predictions.csv and results.json) computes the current rows
    once and writes everything from them: at most 12 Spark jobs (23 when each output read the
    table again), with the rows a plain replay of the commits gives."""
    levels = ["deer", "empty", "fox"]
    commits = [
        [("a.jpg", "deer", 0.9), ("b.jpg", "empty", 0.8), ("c.jpg", None, None)],
        [("d.jpg", "fox", 0.55), ("e.jpg", "deer", 0.6)],
        [("b.jpg", "deer", 0.7), ("f.jpg", "empty", 0.99)],  # b.jpg scored again
    ]
    folder = store.RunFolder(tmp_path / "run")
    folder.start({"images": "file:/s"})
    latest = {}
    for number, photos in enumerate(commits, start=1):
        rows = [
            (f"file:/s/{name}", 10, None, label, conf,
             None if label is None else [{"label": label, "probability": conf}], label, None,
             "not a JPEG" if label is None else None, None, None, None, number)
            for name, label, conf in photos
        ]  # fmt: skip
        latest.update({row[0]: row for row in rows})
        staged = folder.staged("test")
        spark.createDataFrame(rows, job.SCHEMA).repartition(1).write.parquet(str(staged))
        folder.commit(staged, number)
    # e.jpg is no longer listed: kept, and counted as missing.
    listing = spark.createDataFrame([(p,) for p in latest if "e.jpg" not in p], "path string")

    def outputs(spark, rows, folder, videos):
        job.write_outputs(spark, rows, folder, levels, "file:/s", ordered=True, videos=videos)

    sc = spark.sparkContext
    group = f"finish-{tmp_path.name}"
    sc.setJobGroup(group, "the end of a run")
    try:
        summary = job.finish(spark, folder, listing, outputs, log=print)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty()  # the status tracker has every job's start
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    assert 0 < jobs <= 12, jobs

    expected = [latest[path] for path in sorted(latest)]
    assert summary == {"photos": 6, "failures": 1, "removed": 0, "missing": 1}
    assert len(folder.parts()) == 1
    table = pq.read_table(folder.parts()[0]).to_pylist()
    assert [(r["path"], r["predicted_label"], r["commit"]) for r in table] == [
        (row[0], row[3], row[12]) for row in expected
    ]
    written = list(csv.DictReader((folder.folder / "predictions.csv").open(newline="")))
    assert [(r["path"], r["predicted_label"], r["confidence"], r["failure"]) for r in written] == [
        (row[0][len("file:/s/") :], row[3] or "", "" if row[4] is None else f"{row[4]:.4f}",
         row[8] or "")
        for row in expected
    ]  # fmt: skip
    images = json.loads((folder.folder / "results.json").read_text())["images"]
    assert [image["file"] for image in images] == [r["path"] for r in written]
    assert not (folder.folder / "video_results.json").exists()


def reference_entry(relative: str, row: dict, levels: list[str]) -> dict:
    """MegaDetector's batch-output entry of one photo, written out in plain Python."""
    if row["failure"] or row["predicted_label"] is None:
        return {
            "file": relative,
            "failure": row["failure"] or "not classified",
            "detections": None,
        }
    probabilities = {t["label"]: t["probability"] for t in row["top_k"]}
    animal = 1.0 - probabilities.get("empty", 0.0) if "empty" in levels else row["confidence"]
    classifications = [
        [str(levels.index(t["label"])), round(t["probability"], 4)]
        for t in row["top_k"]
        if t["label"] != "empty"
    ]
    detections = []
    if row["predicted_label"] != "empty":
        detections.append(
            {
                "category": "1",
                "conf": round(animal, 4),
                "bbox": [0.0, 0.0, 1.0, 1.0],
                "classifications": classifications,
            }
        )
    return {"file": relative, "max_detection_conf": round(animal, 4), "detections": detections}


def test_outputs_escape_names_and_match_the_megadetector_format(spark, tmp_path):
    levels = ['red "deer", adult', "empty", "fox"]
    rows = [
        ('file:/s/a "quoted", name.jpg', levels[0], 0.7, [(levels[0], 0.7), ("fox", 0.2)], None),
        ("file:/s/b.jpg", "empty", 0.91, [("empty", 0.91), ("fox", 0.00005)], None),
        ("file:/s/c.jpg", None, None, None, 'bad "file", truly'),
        ("file:/s/d\u00e9j\u00e0.jpg", "fox", 0.5, [("fox", 0.5), (levels[0], 0.3)], None),
    ]
    table = spark.createDataFrame(
        [
            (p, 1, None, label, conf, [{"label": a, "probability": b} for a, b in top or []]
             if top else None, label, None, failure, None, None, None, 1)
            for p, label, conf, top, failure in rows
        ],
        job.SCHEMA,
    )  # fmt: skip
    folder = store.RunFolder(tmp_path / "run")
    folder.start({"images": "file:/s"})
    job.write_outputs(spark, table, folder, levels, "file:/s")
    written = list(csv.DictReader((folder.folder / "predictions.csv").open(newline="")))
    assert [r["path"] for r in written] == [
        'a "quoted", name.jpg',
        "b.jpg",
        "c.jpg",
        "d\u00e9j\u00e0.jpg",
    ]
    assert written[0]["predicted_label"] == levels[0] and written[0]["confidence"] == "0.7000"
    assert json.loads(written[0]["top_k"]) == [
        {"label": levels[0], "probability": 0.7},
        {"label": "fox", "probability": 0.2},
    ]
    assert json.loads(written[1]["top_k"])[1] == {"label": "fox", "probability": 0.0001}
    assert written[2]["failure"] == 'bad "file", truly' and written[2]["confidence"] == ""
    results = json.loads((folder.folder / "results.json").read_text())
    expected = [
        reference_entry(relative, r.asDict(recursive=True), levels)
        for relative, r in zip(
            [w["path"] for w in written], table.orderBy("path").collect(), strict=True
        )
    ]
    assert results["images"] == expected
    assert results["classification_categories"] == {"0": levels[0], "1": "empty", "2": "fox"}


# -- camera-trap-size photos ----------------------------------------------------------------


def write_24mp(folder: Path, count: int) -> list[Path]:
    """`count` 6000x4000 JPEGs with texture, about 10 MB each, as 24 MP trail cameras write."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    base = cv2.resize(rng.integers(0, 255, (250, 375, 3), np.uint8), (6000, 4000))
    written = []
    for i in range(count):
        photo = cv2.add(base, rng.integers(0, 30, (4000, 6000, 3), np.uint8))
        cv2.circle(photo, (1000 + 800 * i, 2000), 600, (20, 40, 200), -1)
        path = folder / f"IMG_{i:04d}.JPG"
        assert cv2.imwrite(str(path), photo, [cv2.IMWRITE_JPEG_QUALITY, 90])
        written.append(path)
    return written


def jvm_peak_rss_mib(process: subprocess.Popen) -> float:
    """VmHWM of the Java child of `process` (the local Spark JVM), sampled until it exits."""
    peak = 0.0
    while process.poll() is None:
        for child in Path("/proc").iterdir():
            try:
                if child.name.isdigit() and (child / "stat").read_text().split()[3] == str(
                    process.pid
                ):
                    for line in (child / "status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]) / 1024)
            except (OSError, IndexError):
                continue
        time.sleep(0.5)
    return peak


@pytest.mark.system
def test_24_megapixel_photos_go_through_with_the_default_settings(spark, model, tmp_path):
    from mmlspark.onnx import ONNXModel
    from mmlspark.opencv import ImageTransformer

    photos = write_24mp(tmp_path / "survey", 3)  # more than the two task slots
    out = tmp_path / "run"
    process = start_cli(classify_args(tmp_path / "survey", model, out), tmp_path)
    peak = jvm_peak_rss_mib(process)
    output = finish(process)
    assert process.returncode == 0, output[-3000:]
    rows = rows_of(out)
    assert len(rows) == len(photos) and all(r["predicted_label"] and not r["failure"] for r in rows)
    print(f"classify of {len(photos)} 24 MP photos: Spark JVM peak RSS {peak:.0f} MiB")

    # read_images -> ImageTransformer -> ONNXModel in the shared test session (mmlspark.session()'s
    # defaults): by default each photo is decoded at 1/8 (750x500 still covers 224x224); with
    # reducedDecode=False every photo is decoded whole. Tensors equal opencv-python's either way.
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 1, 1])
    graph = helper.make_graph([helper.make_node("GlobalAveragePool", ["x"], ["y"])], "g", [x], [y])
    mean_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mean_model.ir_version = 9
    onnx.checker.check_model(mean_model)
    for reduced, flags in ((True, cv2.IMREAD_REDUCED_COLOR_8), (False, cv2.IMREAD_COLOR)):
        images = read_images(spark, str(tmp_path / "survey"))
        tensors = (
            ImageTransformer(inputCol="image", outputCol="x", toTensor=True, reducedDecode=reduced)
            .resize(size=224, keepAspectRatio=False)
            .transform(images)
        )
        scored = (
            ONNXModel(feedDict={"x": "x"}, fetchDict={"y": "y"})
            .setModelPayload(mean_model.SerializeToString())
            .transform(tensors)
            .select("path", "error", "y")
            .collect()
        )
        assert len(scored) == len(photos) and all(r.error is None for r in scored)
        for r in scored:
            decoded = cv2.imread(r.path[len("file:") :], flags)
            assert decoded.shape[:2] == ((500, 750) if reduced else (4000, 6000))
            reference = cv2.resize(decoded, (224, 224))
            means = reference[:, :, ::-1].reshape(-1, 3).mean(axis=0)  # RGB channel means
            np.testing.assert_allclose(np.array(r.y).ravel(), means, rtol=1e-4)


# -- one owner: results are never lost or mixed, whatever the field team does ---------------


def train_args(images: Path, model_out: Path) -> list[str]:
    featurizer = str(DEMO / "featurizer.onnx")
    return ["train", "--images", str(images), "--featurizer", featurizer,
            "--model-out", str(model_out)]  # fmt: skip


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (links not followed) and its bytes, by relative name."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_a_retrained_model_at_the_same_path_is_refused_and_a_moved_one_resumes(
    spark, model, tmp_path, capsys
):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=3)
    mine = tmp_path / "model"
    shutil.copytree(model, mine)
    out = tmp_path / "run"
    assert cli.main(classify_args(images, mine, out)) == 0
    before = folder_bytes(out)
    # train replaces the model in place; a new photo arrives from the field.
    other = tmp_path / "other-photos"
    copy_photos(other, per_label=2)
    assert cli.main(train_args(other, mine)) == 0
    new_photo = images / "g00" / "deer" / "new.jpg"
    shutil.copyfile(photos[0], new_photo)
    capsys.readouterr()
    assert cli.main(classify_args(images, mine, out)) == 2
    err = capsys.readouterr().err
    assert "model's content changed" in err and "same path" in err, err
    assert "another --out" in err and "--overwrite" in err
    assert folder_bytes(out) == before  # nothing of the retrained model mixed in

    # The first model moved to another folder is the same run: it resumes, scoring the new photo.
    moved = tmp_path / "archive" / "model-v1"
    shutil.copytree(model, moved)
    summary = job.classify(spark, str(images), str(moved), str(out))
    assert summary["scored"] == 1 and summary["photos"] == len(photos) + 1
    rows = committed_rows(out)
    reference = tmp_path / "reference-v1"
    job.classify(spark, str(images), str(model), str(reference))
    assert committed_rows(reference).keys() == rows.keys()
    assert all(same(rows[p], committed_rows(reference)[p]) for p in rows)

    # --overwrite with the retrained model: every row is the new model's.
    assert cli.main(classify_args(images, mine, out, "--overwrite")) == 0
    retrained = tmp_path / "reference-v2"
    job.classify(spark, str(images), str(mine), str(retrained))
    rows, expected = committed_rows(out), committed_rows(retrained)
    assert rows.keys() == expected.keys() and all(same(rows[p], expected[p]) for p in rows)


def test_an_unmounted_card_or_a_moved_folder_loses_no_result(spark, model, tmp_path, capsys):
    card = tmp_path / "card"
    photos = copy_photos(card, per_label=3)
    out = tmp_path / "run"
    assert cli.main(classify_args(card, model, out)) == 0
    before, table = rows_of(out), committed_rows(out)
    # Unmounted: the mount point is an empty folder. Every command is refused, whatever the flags.
    archive = tmp_path / "archive"
    shutil.move(card, archive)
    card.mkdir()
    for extra in ([], ["--overwrite"], ["--prune-missing"]):
        assert cli.main(classify_args(card, model, out, *extra)) == 2
        err = capsys.readouterr().err
        assert "lists no photos" in err and "unmounted card" in err, err
        assert rows_of(out) == before and committed_rows(out) == table
    # A typo in --images with --overwrite: the listing fails before anything is removed.
    assert cli.main(classify_args(tmp_path / "crad", model, out, "--overwrite")) == 2
    assert "crad" in capsys.readouterr().err and committed_rows(out) == table
    # A model that cannot be loaded with --overwrite: refused before anything is removed.
    empty_model = tmp_path / "empty-model"
    empty_model.mkdir()
    assert cli.main(classify_args(archive, empty_model, out, "--overwrite")) == 2
    assert committed_rows(out) == table

    # Part of the survey back (the rest moved to an archive): every row stays, counted missing.
    shutil.copytree(archive / "g00" / "deer", card / "g00" / "deer")  # times kept: not rescored
    lines: list[str] = []
    summary = job.classify(spark, str(card), str(model), str(out), log=lines.append)
    assert summary["scored"] == 0 and summary["photos"] == len(photos)
    assert summary["missing"] == len(photos) - 3 and summary["removed"] == 0
    assert committed_rows(out) == table and len(rows_of(out)) == len(photos)
    assert any("kept (--prune-missing drops them)" in line for line in lines), lines
    # Dropping them takes --prune-missing.
    assert cli.main(classify_args(card, model, out, "--prune-missing")) == 0
    assert sorted(r["path"] for r in rows_of(out)) == sorted(
        f"g00/deer/{p.name}" for p in (card / "g00" / "deer").iterdir()
    )


def test_a_foreign_or_forged_manifest_gets_nothing_deleted(spark, model, tmp_path, capsys):
    images = tmp_path / "survey"
    copy_photos(images, per_label=1)
    home = tmp_path / "home"
    home.mkdir()
    thesis, sibling = home / "thesis.docx", home / "sibling.txt"
    thesis.write_text("years of work")
    sibling.write_text("next door")
    out = home / "results"
    out.mkdir()
    forged = [
        {"files": [str(thesis), "../sibling.txt"]},  # another tool's run.json
        {"images": "file:/elsewhere"},  # one without a file list
        {"format": store.FORMAT, "run_id": "1", "files": [str(thesis), "../sibling.txt"]},
        {"format": store.FORMAT, "run_id": "1", "files": ["run.json"], "staging": [".."]},
        {"format": store.FORMAT, "run_id": "1", "files": ["predictions.parquet/../../sibling.txt"]},
    ]
    for manifest in forged:
        (out / "run.json").write_text(json.dumps(manifest))
        for extra in ([], ["--overwrite"]):
            assert cli.main(classify_args(images, model, out, *extra)) == 2
            err = capsys.readouterr().err
            assert "run.json" in err and "--overwrite" not in err, err
        assert thesis.read_text() == "years of work" and sibling.read_text() == "next door"
        assert json.loads((out / "run.json").read_text()) == manifest  # not rewritten either
        assert sorted(p.name for p in out.iterdir()) == ["run.json"]  # no lock file left there
    # demo.json: the same rules.
    demo = home / "demo"
    demo.mkdir()
    for manifest in (
        {"files": ["../thesis.docx"]},
        {"format": job.DemoFiles.FORMAT, "files": ["../thesis.docx"]},
        {"format": job.DemoFiles.FORMAT, "files": [str(thesis)]},
    ):
        (demo / "demo.json").write_text(json.dumps(manifest))
        assert cli.main(["demo", "--out", str(demo)]) == 2
        assert "demo.json" in capsys.readouterr().err
        assert thesis.read_text() == "years of work"
    # A demo folder holding a link to a folder outside: a listed name under it is not deleted.
    (demo / "data").symlink_to(home, target_is_directory=True)
    (demo / "demo.json").write_text(
        json.dumps({"format": job.DemoFiles.FORMAT, "files": ["data/thesis.docx"]})
    )
    assert cli.main(["demo", "--out", str(demo)]) == 2
    assert thesis.read_text() == "years of work"


def test_links_inside_the_results_folder_are_never_followed(spark, model, tmp_path, capsys):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=2)
    out, other = tmp_path / "run", tmp_path / "other-run"
    assert cli.main(classify_args(images, model, out)) == 0
    assert cli.main(classify_args(images, model, other)) == 0
    precious = tmp_path / "precious"
    shutil.copytree(images, precious)
    kept = folder_bytes(precious)
    other_table = folder_bytes(other)
    # _staging a link to a photo folder: refused at once (staging is cleared at every start).
    (out / store.STAGING).symlink_to(precious, target_is_directory=True)
    for extra in ([], ["--overwrite"]):
        assert cli.main(classify_args(images, model, out, *extra)) == 2
        assert "not a real directory" in capsys.readouterr().err
    assert folder_bytes(precious) == kept
    (out / store.STAGING).unlink()
    # The table a link to another run's table: neither read as this run's rows nor compacted.
    shutil.move(out / store.TABLE, tmp_path / "own-table")
    (out / store.TABLE).symlink_to(other / store.TABLE, target_is_directory=True)
    for extra in ([], ["--overwrite"]):
        assert cli.main(classify_args(images, model, out, *extra)) == 2
        assert "not a real directory" in capsys.readouterr().err
    assert folder_bytes(other) == other_table
    (out / store.TABLE).unlink()
    shutil.move(tmp_path / "own-table", out / store.TABLE)
    # An output file replaced by a link to a precious file: --overwrite removes the link only.
    thesis = tmp_path / "thesis.docx"
    thesis.write_text("years of work")
    (out / "predictions.csv").unlink()
    (out / "predictions.csv").symlink_to(thesis)
    assert cli.main(classify_args(images, model, out, "--overwrite")) == 0
    assert thesis.read_text() == "years of work"
    assert not (out / "predictions.csv").is_symlink() and len(rows_of(out)) == len(photos)


def test_runs_delete_only_the_files_their_manifest_lists(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=3)
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    # Files named like the job's own that it did not write: a copy of a committed part (reading
    # it would count every photo twice) and a folder in staging.
    own_part = next((out / store.TABLE).glob("part-*.parquet"))
    stray_part = out / store.TABLE / "part-00000099-0000-deadbeef.parquet"
    shutil.copyfile(own_part, stray_part)
    stray_staging = out / store.STAGING / "commit-00000001-cafebabe" / "keep.txt"
    stray_staging.parent.mkdir(parents=True)
    stray_staging.write_text("not the job's")
    # A new photo: the run commits it one photo at a time, then compacts the table.
    shutil.copyfile(photos[0], images / "g00" / "fox" / "late.jpg")
    assert cli.main(classify_args(images, model, out, "--commit-every", "1")) == 0
    assert stray_part.exists() and stray_staging.read_text() == "not the job's"
    assert len(rows_of(out)) == len(photos) + 1
    listed = json.loads((out / store.MANIFEST).read_text())["files"]
    assert f"{store.TABLE}/{stray_part.name}" not in listed
    table = pq.ParquetDataset([str(out / n) for n in listed if n.startswith(store.TABLE)]).read()
    assert table.num_rows == len(photos) + 1
    # --overwrite removes its own files only.
    assert cli.main(classify_args(images, model, out, "--overwrite")) == 0
    assert stray_part.exists() and stray_staging.read_text() == "not the job's"
    assert len(rows_of(out)) == len(photos) + 1


LOCK_HOLDER = """
import os, sys, time
from pathlib import Path
from mmlspark.apps.camera_trap.store import OutputLock
folder, log, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
tried = os.open(log + ".tried", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(tried, f"{os.getpid()}\\n".encode())
with OutputLock(folder, wait=True, poll_seconds=0.02):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"in {os.getpid()}\\n".encode())
    time.sleep(hold)
    os.write(fd, f"out {os.getpid()}\\n".encode())
"""


def hold_lock(folder: Path, log: Path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(folder), str(log), str(seconds)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.system
def test_a_waiting_run_is_not_refused_for_the_holders_manifest_in_flight(
    spark, model, tmp_path, capsys
):
    """A run that holds the folder writes its manifest through a temporary file and a rename; a
    run started then sees that file beside no manifest. It waits for the lock (or says the folder
    is in use) instead of refusing the folder as not this job's."""
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=1)
    out, log = tmp_path / "run", tmp_path / "log"
    out.mkdir()
    holder = hold_lock(out, log, 600)
    wait_for(lambda: log.exists() and "in" in log.read_text(), 60, "the holder")
    in_flight = out / ".run.json.0123abcd.tmp"  # the holder's manifest, mid-write
    in_flight.write_text("{")
    try:
        capsys.readouterr()
        assert cli.main(classify_args(images, model, out)) == 2
        assert "in use by another run of this job" in capsys.readouterr().err
        codes: list[int] = []
        waiter = threading.Thread(
            target=lambda: codes.append(cli.main(classify_args(images, model, out, "--wait")))
        )
        waiter.start()
        time.sleep(2)
        assert not codes  # waiting, not refused
        in_flight.unlink()  # the holder's rename, then its end
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    waiter.join(timeout=600)
    assert codes == [0] and len(rows_of(out)) == len(photos)


@pytest.mark.system
def test_the_lock_goes_with_a_killed_holder_and_is_never_held_twice(tmp_path):
    for racers in (2, 3, 5):
        folder, log = tmp_path / f"run{racers}", tmp_path / f"log{racers}"
        folder.mkdir()
        holder = hold_lock(folder, log, 600)
        wait_for(lambda lg=log: lg.exists() and "in" in lg.read_text(), 60, "the holder")
        waiting = [hold_lock(folder, log, 0.3) for _ in range(racers)]
        tried = Path(f"{log}.tried")
        wait_for(lambda t=tried, n=racers: len(t.read_text().split()) == n + 1, 120, "racers")
        time.sleep(0.2)  # each racer has tried the lock about ten times (every 0.02 s)
        assert log.read_text().count("in ") == 1  # the others wait
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert all(p.wait(timeout=120) == 0 for p in waiting)
        events = log.read_text().split()[2:]  # after the killed holder's "in"
        pairs = list(zip(events[0::4], events[1::4], events[2::4], events[3::4], strict=True))
        # in pid, out pid, in pid, out pid...: never two holders at once, each racer once.
        assert all(a == "in" and c == "out" and b == d for a, b, c, d in pairs), events
        assert sorted(int(b) for _, b, _, _ in pairs) == sorted(p.pid for p in waiting)


def test_without_file_locks_the_lock_is_an_exclusive_file(tmp_path, monkeypatch):
    import fcntl

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with store.OutputLock(tmp_path):
        assert (tmp_path / store.EXCLUSIVE_LOCK).exists()
        with pytest.raises(store.FolderError, match="without file locks"):
            store.OutputLock(tmp_path).__enter__()
    assert not (tmp_path / store.EXCLUSIVE_LOCK).exists()


@pytest.mark.system
def test_concurrent_waiting_runs_over_a_killed_holder_end_with_one_row_per_photo(
    spark, model, tmp_path
):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=2)
    reference = tmp_path / "reference"
    job.classify(spark, str(images), str(model), str(reference))
    expected = committed_rows(reference)
    for runs in (2, 5):
        out, log = tmp_path / f"run{runs}", tmp_path / f"log{runs}"
        out.mkdir()
        holder = hold_lock(out, log, 600)
        wait_for(lambda lg=log: lg.exists() and "in" in lg.read_text(), 60, "the holder")
        codes: list[int] = []
        args = classify_args(images, model, out, "--wait", "--commit-every", "2")
        threads = [
            threading.Thread(target=lambda a=args, c=codes: c.append(cli.main(a)))
            for _ in range(runs)
        ]
        for t in threads:
            t.start()
        time.sleep(1.0)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        for t in threads:
            t.join(timeout=600)
        assert codes == [0] * runs
        rows = committed_rows(out)
        assert rows.keys() == expected.keys() and all(same(rows[p], expected[p]) for p in rows)
        listed = json.loads((out / store.MANIFEST).read_text())["files"]
        parts = [str(out / n) for n in listed if n.startswith(store.TABLE)]
        assert pq.ParquetDataset(parts).read().num_rows == len(photos)  # one row a photo
        assert len(rows_of(out)) == len(photos)


def test_runs_lost_from_outside_fail_no_photo_and_failures_can_be_retried(
    spark, model, tmp_path, monkeypatch
):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=2)
    reference = tmp_path / "reference"
    job.classify(spark, str(images), str(model), str(reference))
    expected = committed_rows(reference)
    run = {
        "images": job._qualified(spark, str(images)),
        "model": str(model),
        "model_sha256": store.content_hash(model),
        "bursts": "off",
    }
    photo = f"file:{photos[0]}"
    # A run killed from outside (no record of why) while this photo was scored alone, fewer
    # times than it takes to suspect it: the photo is scored again, normally.
    for vanished in range(job.VANISHED_RUNS - 1):
        out = tmp_path / f"run{vanished}"
        folder = store.RunFolder(out)
        folder.start(run)
        folder.set_inflight([photo], level=2, vanished=vanished)
        lines: list[str] = []
        job.classify(spark, str(images), str(model), str(out), log=lines.append)
        assert committed_rows(out)[photo] == expected[photo], lines
    # The same photo lost once more: now a failure row, which --retry-failures scores again.
    out = tmp_path / "run"
    folder = store.RunFolder(out)
    folder.start(run)
    folder.set_inflight([photo], level=2, vanished=job.VANISHED_RUNS - 1)
    job.classify(spark, str(images), str(model), str(out))
    assert "the process died while scoring this file alone" in committed_rows(out)[photo][2]
    job.classify(spark, str(images), str(model), str(out))
    assert committed_rows(out)[photo][2] is not None  # failures stay without the flag
    assert cli.main(classify_args(images, model, out, "--retry-failures")) == 0
    rows = committed_rows(out)
    assert rows.keys() == expected.keys() and all(same(rows[p], expected[p]) for p in rows)

    # A scoring error in a one-photo commit is tried once more before it becomes a failure.
    original = job.score
    failing = {"left": 0}

    def flaky(photos_df, *args, **kwargs):
        scored = original(photos_df, *args, **kwargs)
        if failing["left"] > 0:
            failing["left"] -= 1
            return scored.filter(F.raise_error(F.lit("transient scoring error")).isNull())
        return scored

    from pyspark.sql import functions as F

    monkeypatch.setattr("mmlspark.apps.camera_trap.scoring.score", flaky)
    for failures, outcome in ((1, None), (2, "scoring failed: ")):
        again = tmp_path / f"flaky{failures}"
        single = copy_photos(tmp_path / f"one{failures}", per_label=1)[:1]
        failing["left"] = failures
        lines = []
        job.classify(spark, str(single[0].parent), str(model), str(again), log=lines.append)
        (failure,) = [row[2] for row in committed_rows(again).values()]
        assert any("trying it once more" in line for line in lines), lines
        if outcome is None:
            assert failure is None
        else:
            assert failure.startswith(outcome) and "transient scoring error" in failure


def test_file_uris_names_with_spaces_and_evaluate_folders(spark, model, tmp_path, capsys):
    images = tmp_path / "survey"
    site = images / " Site A " / "deer"
    site.mkdir(parents=True)
    shutil.copyfile(next((DEMO / "images" / "deer").glob("*.jpg")), site / "a.jpg")
    # --out inside --images written as a file: URI in any of its forms: refused.
    for uri in (f"file://{images}", f"file:{images}", f"file://localhost{images}"):
        args = ["classify", "--images", uri, "--model", str(model), "--out", str(images / "out")]
        assert cli.main(args) == 2
        assert "overlap" in capsys.readouterr().err
    assert not (images / "out").exists()
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    (row,) = rows_of(out)
    assert row["path"] == " Site A /deer/a.jpg"  # the CSV keeps leading and trailing spaces
    top = json.loads(row["top_k"])
    assert top[0]["label"] == row["predicted_label"] and len(top) == 3
    assert json.loads((out / "results.json").read_text())["images"][0]["file"] == row["path"]

    # evaluate: refuses a folder holding anything else; rewrites its own files.
    report = tmp_path / "report"
    report.mkdir()
    (report / "notes.txt").write_text("mine")
    assert cli.main(["evaluate", "--predictions", str(out), "--out", str(report)]) == 2
    assert "not an evaluate output" in capsys.readouterr().err
    assert sorted(p.name for p in report.iterdir()) == ["notes.txt"]
    evaluation = tmp_path / "evaluation"
    assert cli.main(["evaluate", "--predictions", str(out), "--out", str(evaluation)]) == 0
    written = {p.name for p in evaluation.iterdir()}
    assert {"metrics.json", "confusion_matrix.png"} <= written
    # Every file goes in with a rename: what a killed run leaves is a temporary name of its own,
    # which does not make the folder foreign; the next run replaces the files.
    (evaluation / ".samples.0a1b2c3d.png").write_bytes(b"half a PNG")
    (evaluation / ".metrics.json.0a1b2c3d.tmp").write_text('{"photos": ')
    (evaluation / "metrics.json").write_text("{}")
    assert cli.main(["evaluate", "--predictions", str(out), "--out", str(evaluation)]) == 0
    metrics = json.loads((evaluation / "metrics.json").read_text())
    assert metrics["photos"] == 1
    assert {p.name for p in evaluation.iterdir()} == written | {
        ".samples.0a1b2c3d.png",
        ".metrics.json.0a1b2c3d.tmp",
    }  # its own temporary names appear only where a run was killed


def test_a_model_off_this_machine_is_identified_by_its_saved_uid(spark, model, tmp_path):
    """Where the model's files cannot be hashed here (hdfs:, s3a:), the run is identified by the
    pipeline's uid: Spark keeps it through save and load, and a new training draws another."""
    import mmlspark

    loaded = mmlspark.load_pipeline(str(model))
    assert job._model_identity(str(model), loaded) == {"model_sha256": store.content_hash(model)}
    assert job._model_identity("s3a://bucket/model", loaded) == {"model_uid": loaded.uid}
    loaded.write().save(str(tmp_path / "copy"))
    assert mmlspark.load_pipeline(str(tmp_path / "copy")).uid == loaded.uid
    images = tmp_path / "few"
    copy_photos(images, per_label=2)
    job.train(spark, str(images), str(DEMO / "featurizer.onnx"), str(tmp_path / "again"))
    assert mmlspark.load_pipeline(str(tmp_path / "again")).uid != loaded.uid


def test_hidden_names_are_failure_rows_until_included(spark, model, tmp_path):
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=2)
    review = images / "_to_review"
    review.mkdir()
    shutil.copyfile(photos[0], review / "a.jpg")
    shutil.copyfile(photos[2], images / "g00" / "deer" / ".IMG_0001.jpg")
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    rows = {r["path"]: r for r in rows_of(out)}
    assert len(rows) == len(photos) + 2  # every name under --images gives a row
    for name in ("_to_review", "g00/deer/.IMG_0001.jpg"):
        assert rows[name]["failure"].startswith("skipped: its name starts with '.' or '_'")
        assert "--include-hidden" in rows[name]["failure"] and rows[name]["predicted_label"] == ""
    # --include-hidden scores them as the same photos are scored elsewhere; the folder's
    # "skipped" row gives way to the rows of what is in it.
    assert cli.main(classify_args(images, model, out, "--include-hidden")) == 0
    rows = {r["path"]: r for r in rows_of(out)}
    by_name = {str(p.relative_to(images)): rows[str(p.relative_to(images))] for p in photos}
    assert set(rows) == set(by_name) | {"_to_review/a.jpg", "g00/deer/.IMG_0001.jpg"}
    first, third = (
        by_name[str(photos[0].relative_to(images))],
        by_name[str(photos[2].relative_to(images))],
    )
    review_row = rows["_to_review/a.jpg"]
    assert (review_row["predicted_label"], review_row["confidence"]) == (
        first["predicted_label"], first["confidence"])  # fmt: skip
    assert rows["g00/deer/.IMG_0001.jpg"]["confidence"] == third["confidence"]
    assert not any(r["failure"] for r in rows.values())
    # Without the flag again: the scored rows stay (their files did not change).
    assert cli.main(classify_args(images, model, out)) == 0
    again = {r["path"]: r for r in rows_of(out)}
    assert again["_to_review/a.jpg"] == rows["_to_review/a.jpg"]


def test_a_jpeg_without_its_image_data_is_a_failure_row(spark, model, tmp_path):
    """A 6000x4000 frame header with a few hundred bytes of image data and an intact end marker
    (what a damaged card can leave): libjpeg decodes it as gray without an error, at 1/8 scale
    well under the pixel limit; the job lists it as a failure, not a photo of an empty scene."""
    images = tmp_path / "survey"
    photos = copy_photos(images, per_label=1)
    hollow = jpeg_claiming(6000, 4000)
    assert cv2.imdecode(np.frombuffer(hollow, np.uint8), cv2.IMREAD_REDUCED_COLOR_8) is not None
    (images / "damaged.jpg").write_bytes(hollow)
    out = tmp_path / "run"
    assert cli.main(classify_args(images, model, out)) == 0
    rows = {r["path"]: r for r in rows_of(out)}
    assert len(rows) == len(photos) + 1
    assert rows["damaged.jpg"]["failure"].startswith("corrupt JPEG: ")
    damaged = rows["damaged.jpg"]
    assert "8x8 blocks" in damaged["failure"] and damaged["confidence"] == ""
    assert sum(bool(r["failure"]) for r in rows.values()) == 1


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_units_are_ranked_in_name_order_without_one_partition_for_all(spark, partitions):
    """The scoring loop's numbering of bursts or photos (0, 1, ... in name order), which it
    commits in ranges: every distinct unit once, ranked as Python's sorted() orders them, with
    the units spread over range partitions instead of one window partition; the units and rows
    counted, and a range of ranks giving every row of its units."""
    import random

    from mmlspark.apps.camera_trap.scorer import ranked_units

    names = [
        f"site{random.Random(i).randint(0, 40):02d}/IMG_{i % 500:04d}.JPG" for i in range(1200)
    ]
    random.Random(0).shuffle(names)
    todo = spark.createDataFrame([(n, i) for i, n in enumerate(names)], "unit string, id int")
    units = ranked_units(todo.repartition(5), partitions)
    try:
        got = {r["unit"]: r["_unit"] for r in units.ranked.collect()}
        assert units.ranked.count() == len(got) == len(set(names)) == units.count
        chunk = {(r["unit"], r["id"], r["_unit"]) for r in units.chunk(10, 20).collect()}
    finally:
        units.unpersist()
    assert got == {name: rank for rank, name in enumerate(sorted(set(names)))}
    assert units.rows == len(names)
    # A chunk holds every row of its units, with their rank.
    assert chunk == {(n, i, got[n]) for i, n in enumerate(names) if 10 <= got[n] < 20}


def test_commits_reach_their_size_once_the_first_commit_s_one_time_costs_are_past(spark, tmp_path):
    """A run's first commit (8 photos a core) carries its one-time costs; the second commit is
    sized from the first's rate, and its own rate replaces that one instead of being averaged
    with it; from the third on, each commit's rate is averaged with the estimate so far. A
    commit aims at 0.8 commit_seconds, at most commit_every photos."""
    from mmlspark.apps.camera_trap.scorer import Scorer
    from mmlspark.apps.camera_trap.settings import SCHEMA, ClassifySettings, _Work
    from mmlspark.core.session import default_parallelism

    settings = ClassifySettings(commit_every=1000, commit_seconds=10.0)
    work = _Work("classify", SCHEMA, lambda *_: None, lambda *_: None)  # type: ignore[arg-type]
    scorer = Scorer(spark, store.RunFolder(tmp_path / "out"), work, settings, print)
    assert scorer._chunk_photos() == 8 * default_parallelism(spark)
    scorer.measured(16, 8.0)  # 2 photos/s: the sessions and the JIT in it
    assert scorer._chunk_photos() == 16  # 2 * 10 * 0.8
    scorer.measured(96, 8.0)  # 12 photos/s, which replaces 2
    assert scorer._chunk_photos() == 96  # 12 * 10 * 0.8
    scorer.measured(64, 8.0)  # 8 photos/s: (12 + 8) / 2
    assert scorer._chunk_photos() == 80
    scorer.measured(100, 1.0)  # 100 photos/s: (10 + 100) / 2
    assert scorer._chunk_photos() == 440
    scorer.measured(2000, 1.0)  # (55 + 2000) / 2: over commit_every
    assert scorer._chunk_photos() == 1000
