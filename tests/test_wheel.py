"""The built wheel installs into a clean virtualenv and runs a pipeline with no other step."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

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


def test_wheel_requires_the_spark_line_it_was_built_for():
    import tomllib

    from mmlspark._version import spark_version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"pyspark=={spark_version}" in project["dependencies"]
    with zipfile.ZipFile(WHEEL) as zf:
        metadata = zf.read(f"mmlspark-{mmlspark.__version__}.dist-info/METADATA").decode()
    assert f"Requires-Dist: pyspark=={spark_version}" in metadata.splitlines()
    assert f"Version: {mmlspark.__version__}" in metadata.splitlines()


def test_wheel_contains_the_matching_jar():
    assert WHEEL.is_file(), f"{WHEEL} is missing: 'make test' builds it before the Python suites"
    with zipfile.ZipFile(WHEEL) as zf:
        names = zf.namelist()
        jars = [n for n in names if n.startswith("mmlspark/jars/repo/") and n.endswith(".jar")]
        assert len(jars) == 1 and f"mmlspark_2.13-{mmlspark.__version__}-" in jars[0]
        assert "mmlspark/jars/packages.txt" in names
        assert "mmlspark/py.typed" in names
        assert "mmlspark/stages/_SelectColumns.py" in names
        demo = "mmlspark/apps/camera_trap/demo_data/"
        assert f"{demo}featurizer.onnx" in names
        assert sum(n.startswith(f"{demo}images/") and n.endswith(".jpg") for n in names) == 120


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


def test_self_contained_jar_runs_under_spark_submit(tmp_path):
    import pyspark

    assembly = ROOT / "dist" / f"mmlspark-assembly-{mmlspark.__version__}.jar"
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
