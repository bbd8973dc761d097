"""The scaling benchmark's quick run (bench/scaling.py --quick), on the suite's standalone cluster:
apart from the other benchmarks' (test_bench.py), so that make test runs it in the chain whose
tests start that cluster anyway (tests/test_standalone_cluster.py)."""

from __future__ import annotations

import hashlib

import pytest
from test_bench import (
    assert_same_logits,
    bench,
    figures_of,
    quick_run_of,
    reference_logits,
    run_quick,
)


@pytest.fixture(scope="module")
def quick_runs(request, tmp_path_factory) -> dict:
    return run_quick(request, tmp_path_factory)


@pytest.mark.system
@quick_run_of("scaling")
def test_scaling_benchmark_quick_run_measures_three_masters(quick_runs):
    out = quick_runs["out"] / "scaling.md"
    figures = figures_of(quick_runs, "scaling")
    rates = figures["images_per_s"]
    assert set(rates) == {
        "local[1]",
        "local[2]",
        "standalone, 2 workers x 1 core",
        "local[1], Python backend",
        "local[2], Python backend",
    }
    assert all(rate > 0 for rate in rates.values())
    assert figures["python_backend_speedup_local2_vs_local1"] > 0
    # Every master and backend computed onnxruntime's logits of the same seeded tensors.
    model = bench("models").tiny_cnn()
    assert hashlib.sha256(model).hexdigest() == figures["model_sha256"]
    expected = reference_logits(model, figures["tensor_seed"], 256)
    assert set(figures["logits"]) == set(rates)
    for master, digest in figures["logits"].items():
        assert_same_logits(digest, expected, master)
    assert "| local[2] |" in out.read_text()
