"""The built wheel installs into a clean virtualenv and runs a pipeline with no other step."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import mmlspark

ROOT = Path(__file__).resolve().parent.parent
WHEEL = ROOT / "dist" / f"mmlspark-{mmlspark.__version__}-py3-none-any.whl"

SCRIPT = textwrap.dedent(
    """
    import sys, tempfile
    import mmlspark
    from pyspark.ml import Pipeline, PipelineModel
    from mmlspark.stages import ClassBalancer, MiniBatchTransformer, FlattenBatch, SelectColumns

    assert "site-packages" in mmlspark.__file__, mmlspark.__file__
    spark = mmlspark.session("local[2]", {"spark.ui.enabled": "false"})
    df = spark.createDataFrame([(i, "ab"[i % 3 == 0]) for i in range(12)], "id long, c string")
    stages = [ClassBalancer(inputCol="c"), MiniBatchTransformer(miniBatchSize=5), FlattenBatch(),
              SelectColumns(cols=["id", "weight"])]
    model = Pipeline(stages=stages).fit(df)
    path = tempfile.mkdtemp() + "/model"
    model.save(path)
    rows = sorted(PipelineModel.load(path).transform(df).collect())
    weights = {r.id: r.weight for r in rows}
    # 12 rows: class b has 4 (ids 0,3,6,9), class a has 8: weights 12/(2*4) and 12/(2*8)
    assert len(rows) == 12
    assert all(abs(weights[i] - (1.5 if i % 3 == 0 else 0.75)) < 1e-12 for i in range(12))
    print("wheel-ok", mmlspark.__version__)
    """
)


def test_wheel_requires_every_spark_line_it_has_a_jar_for():
    import tomllib

    from mmlspark._version import pyspark_requirement, spark_lines, tested_pyspark

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"pyspark{pyspark_requirement}" in project["dependencies"]
    with zipfile.ZipFile(WHEEL) as zf:
        metadata = zf.read(f"mmlspark-{mmlspark.__version__}.dist-info/METADATA").decode()
    from packaging.specifiers import SpecifierSet

    required = [x for x in metadata.splitlines() if x.startswith("Requires-Dist: pyspark")]
    assert len(required) == 1, required
    specifiers = required[0].removeprefix("Requires-Dist: pyspark")
    assert SpecifierSet(specifiers) == SpecifierSet(pyspark_requirement)
    assert f"Version: {mmlspark.__version__}" in metadata.splitlines()
    # The range is exactly the lines served: the lowest line's first release to the line after
    # the highest.
    lines = sorted(spark_lines, key=lambda x: tuple(map(int, x.split("."))))
    major, minor = lines[-1].split(".")
    assert pyspark_requirement == f">={lines[0]},<{major}.{int(minor) + 1}"
    assert set(tested_pyspark) == set(spark_lines)


def test_wheel_contains_a_jar_for_each_scala_version():
    from mmlspark._version import spark_lines

    assert WHEEL.is_file(), f"{WHEEL} is missing: 'make test' builds it before the Python suites"
    with zipfile.ZipFile(WHEEL) as zf:
        names = zf.namelist()
        jars = [n for n in names if n.startswith("mmlspark/jars/repo/") and n.endswith(".jar")]
        scalas = sorted(set(spark_lines.values()))
        assert len(jars) == len(scalas), jars
        for scala in scalas:
            assert sum(f"mmlspark_{scala}-{mmlspark.__version__}-" in j for j in jars) == 1
            assert f"mmlspark/jars/packages_{scala}.txt" in names
        assert "mmlspark/py.typed" in names
        assert "mmlspark/stages/_SelectColumns.py" in names
        demo = "mmlspark/apps/camera_trap/demo_data/"
        assert f"{demo}featurizer.onnx" in names
        assert sum(n.startswith(f"{demo}images/") and n.endswith(".jpg") for n in names) == 120


@pytest.mark.system
def test_wheel_installs_in_a_clean_virtualenv_and_runs_a_pipeline(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(WHEEL)], check=True)
    result = subprocess.run(
        [str(python), "-c", SCRIPT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"wheel-ok {mmlspark.__version__}" in result.stdout
    usage = subprocess.run(
        [str(venv / "bin" / "mmlspark-camera-trap"), "--help"], capture_output=True, text=True
    )
    assert usage.returncode == 0 and "classify" in usage.stdout


SUBMITTED = textwrap.dedent(
    """
    from pyspark.sql import SparkSession
    from mmlspark.stages import EnsembleByKey

    spark = SparkSession.builder.getOrCreate()
    df = spark.createDataFrame([("a", 1.0), ("a", 3.0), ("b", 5.0)], "k string, x double")
    rows = EnsembleByKey(keys=["k"], cols=["x"]).transform(df).collect()
    means = {r.k: r["mean(x)"] for r in rows}
    assert means == {"a": 2.0, "b": 5.0}, means
    print("submit-ok")
    """
)


@pytest.mark.system
def test_self_contained_jar_runs_under_spark_submit(tmp_path):
    import pyspark

    assembly = ROOT / "dist" / f"mmlspark_2.13-assembly-{mmlspark.__version__}.jar"
    assert assembly.is_file(), f"{assembly} is missing: 'make jar' builds it"
    script = tmp_path / "job.py"
    script.write_text(SUBMITTED)
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [str(spark_submit), "--master", "local[2]", "--jars", str(assembly), str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "submit-ok" in result.stdout
