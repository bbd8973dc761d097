"""The GPU proof kit (scripts/gpu_kit.py, scripts/gpu_proof.sh) on the CPU: a mini kit made from
this venv and the built jars (no download) is cut into parts, checked and reassembled, and its
dry run runs every measurement of the proof with the CPU provider, in the kit's Spark and through
the kit's java wrapper and ONNX Runtime native folder. The outputs it reports are checked against
onnxruntime run here on the same seeded tensors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import gpu_kit  # noqa: E402

PART_MIB = 40


def test_jar_names_drop_scala_suffix_and_version() -> None:
    assert gpu_kit.jar_name("spark-core_2.13-4.3.0.jar") == "spark-core"
    assert gpu_kit.jar_name("log4j-1.2-api-2.25.4.jar") == "log4j-1.2-api"
    assert gpu_kit.jar_name("netty-transport-4.2.13.Final.jar") == "netty-transport"
    assert gpu_kit.jar_name("zstd-jni-1.5.7-7.jar") == "zstd-jni"
    assert gpu_kit.jar_name("orc-core-2.3.0-shaded-protobuf.jar") == "orc-core"
    assert gpu_kit.jar_name("hive-exec-2.3.10-core.jar") == "hive-exec-2.3.10-core"


def run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env}, timeout=600
    )


@pytest.mark.system
def test_dry_run_of_a_mini_kit(spark, tmp_path: Path) -> None:
    # `spark` (the shared session) has had Ivy fetch the jars the kit takes ONNX Runtime Java's
    # classes and OpenCV Java from.
    kit = tmp_path / "kit"
    built = run(
        [
            sys.executable,
            "scripts/gpu_kit.py",
            "build",
            "--mini",
            "--out",
            str(kit),
            "--preset",
            "0",
            "--part-mib",
            str(PART_MIB),
        ]
    )
    assert built.returncode == 0, built.stdout + built.stderr

    # Every part within its limit, every file's SHA-256 the manifest's, the chunks of each blob
    # adding up to it.
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    parts = sorted(p.name for p in kit.glob("part-*"))
    assert parts == [p["name"] for p in manifest["parts"]] and len(parts) >= 2
    for part in manifest["parts"]:
        folder = kit / part["name"]
        assert sum(f.stat().st_size for f in folder.iterdir()) < PART_MIB * 2**20 + 2**16
        for name, digest in part["files"].items():
            assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
        sums = dict(
            line.split("  ")[::-1]
            for line in (folder / "SHA256SUMS").read_text().split("\n")
            if line
        )
        assert sums == part["files"]
    for blob in manifest["blobs"]:
        whole = b"".join((kit / p / c).read_bytes() for p, c in blob["chunks"])
        assert len(whole) == blob["size"]
        assert hashlib.sha256(whole).hexdigest() == blob["sha256"]

    # A part with one byte changed is refused; the run refuses a kit with parts missing.
    bad = tmp_path / "bad" / parts[0]
    shutil.copytree(kit / parts[0], bad)
    chunk = bad / next(iter(manifest["parts"][0]["files"]))
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 1
    chunk.write_bytes(bytes(data))
    refused = run(
        [sys.executable, "scripts/gpu_kit.py", "take", str(bad), "--home", str(tmp_path / "h1")]
    )
    assert refused.returncode != 0 and "SHA-256" in refused.stderr + refused.stdout
    half = run(
        [
            "scripts/gpu_proof.sh",
            "--take",
            str(kit / parts[0]),
            "--run",
            "--home",
            str(tmp_path / "h2"),
        ]
    )
    assert half.returncode == 1 and "take the other parts first" in half.stderr

    out = tmp_path / "gpu.md"
    dry = run(
        ["scripts/gpu_proof.sh", "--dry-run", "--kit", str(kit), "--out", str(out)]
        + ["--", "--variants", "service on"]
    )
    assert dry.returncode == 0, dry.stdout[-5000:] + dry.stderr[-5000:]
    # The probe (no Spark) ran the tiny CNN with onnxruntime and with ONNX Runtime Java first.
    printed = dry.stdout[dry.stdout.index('{\n "device"') : dry.stdout.index("[gpu-proof] probe")]
    probe = json.loads(printed)
    assert probe["device"] == "cpu" and probe["python_outputs"]["max_abs"] == 0.0
    assert probe["java_first_run_seconds"] > 0
    assert "DRY RUN" in out.read_text()
    figures = json.loads(out.with_suffix(".json").read_text())
    assert figures["dry_run"] is True
    env = figures["environment"]
    # The kit's Spark, its java wrapper around this machine's java, its ONNX Runtime folder.
    java = run(["java", "-version"]).stderr.splitlines()[0]
    assert env["java"].split()[-1] in java
    assert env["onnxruntime_java_native"].endswith("/kit/ort-java")
    assert "CPU" in env["onnxruntime_java_providers"]
    assert not figures["notes"], figures["notes"]

    # The tiny CNN's logits from each contender equal onnxruntime's here on the same tensors.
    import models

    section = figures["sections"]["inference tiny"]
    shape = section["tensors"]["shape"]
    tensors = np.random.default_rng(section["tensors"]["seed"]).standard_normal(
        shape, dtype=np.float32
    )
    session = ort.InferenceSession(models.tiny_cnn(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: tensors})[0].astype(np.float64)
    weights = np.random.default_rng(0).standard_normal(expected.shape)
    for name, found in section["outputs"].items():
        assert found["within_tolerance"] and found["top1_equal"] == 1.0, name
        assert found["abs_sum"] == pytest.approx(np.abs(expected).sum(), rel=1e-5), name
        weighted = (weights * expected).sum()
        assert found["weighted_sum"] == pytest.approx(weighted, rel=1e-4, abs=1e-3), name
    assert set(section["rates"]) == {
        "ONNXModel",
        "ONNXModel, service on",
        "ONNXModel, Python backend",
        "raw ORT Java",
        "raw ORT Python",
    }
    assert all(r["median"] > 0 for r in section["rates"].values())
    # By default on this CPU the tasks run their own batches; the variant goes through the service.
    assert section["service"]["ONNXModel"] == {"batches": 0, "largest": 0}
    assert section["service"]["ONNXModel, service on"]["batches"] > 0

    memory = figures["sections"]["memory"]
    assert memory["source"] == "JVM RSS" and len(memory["after_each_mib"]) == memory["jobs"] == 3
    photos = figures["sections"]["photos"]
    assert photos["rows_scored"] == photos["photos"] == 8
