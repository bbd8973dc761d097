"""Bad input fails early and clearly; mismatched builds are named."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from pyspark.errors import IllegalArgumentException

import mmlspark
from mmlspark.core import session as session_module
from mmlspark.stages import EnsembleByKey, MiniBatchTransformer, Repartition, SelectColumns


def test_invalid_values_fail_at_set_time_with_the_param_named(spark):
    with pytest.raises(ValueError, match=r"miniBatchSize.*invalid value 0"):
        MiniBatchTransformer(miniBatchSize=0)
    stage = Repartition(n=4)
    with pytest.raises(ValueError, match="'n'"):
        stage.setN(-1)
    assert stage.getN() == 4, "a refused value must leave the old one in place"
    with pytest.raises(ValueError, match="strategy"):
        EnsembleByKey().setStrategy("median")
    with pytest.raises(TypeError):
        SelectColumns(cols=5)


def test_missing_column_fails_before_any_job_and_writes_nothing(spark, tmp_path):
    df = spark.createDataFrame([(1, "a")], "id int, name string")
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("schema-check", "schema check")
    target = tmp_path / "out"
    with pytest.raises(IllegalArgumentException) as error:
        SelectColumns(cols=["id", "nme"]).transform(df).write.parquet(str(target))
    message = str(error.value)
    assert "SelectColumns" in message and "'nme'" in message and "[id, name]" in message
    assert list(tracker.getJobIdsForGroup("schema-check")) == []
    assert not target.exists()
    spark.sparkContext.setJobGroup("", "")


def test_wrong_type_names_expected_and_actual(spark):
    df = spark.createDataFrame([("a", "b")], "k string, x string")
    with pytest.raises(
        IllegalArgumentException, match="'x' must be numeric or vector but was string"
    ):
        EnsembleByKey(keys=["k"], cols=["x"]).transform(df)


def _fake_jar(path, version):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mmlspark/build.properties", f"version={version}\n")


def _fake_repo_jar(root, version):
    folder = root / "repo" / "mmlspark" / "mmlspark_2.13" / f"{version}-0badc0de"
    folder.mkdir(parents=True)
    _fake_jar(folder / f"mmlspark_2.13-{version}-0badc0de.jar", version)


def test_bundled_jar_of_another_version_is_named_at_import(tmp_path, monkeypatch):
    _fake_repo_jar(tmp_path, "9.9.9")
    monkeypatch.setattr(session_module, "_JARS_DIR", tmp_path)
    with pytest.raises(mmlspark.VersionMismatchError) as error:
        session_module.check_bundled_jar()
    assert mmlspark.__version__ in str(error.value) and "9.9.9" in str(error.value)


def test_jvm_jar_of_another_version_is_named(spark, monkeypatch):
    monkeypatch.setattr(session_module, "__version__", "0.0.0-other")
    monkeypatch.setattr(session_module, "_checked_contexts", set())
    with pytest.raises(mmlspark.VersionMismatchError) as error:
        session_module.require_jvm_library(spark.sparkContext)
    assert "0.0.0-other" in str(error.value) and mmlspark.__version__ in str(error.value)


def test_spark_conf_loads_the_bundled_jar_as_a_package():
    conf = mmlspark.spark_conf()
    packages = conf["spark.jars.packages"].split(",")
    assert len(packages) == 1 and packages[0].startswith(
        f"mmlspark:mmlspark_2.13:{mmlspark.__version__}-"
    )
    repo = Path(conf["spark.jars.repositories"].removeprefix("file://"))
    version = packages[0].split(":")[2]
    artifact = repo / "mmlspark" / "mmlspark_2.13" / version / f"mmlspark_2.13-{version}"
    assert mmlspark.jar_path() == f"{artifact}.jar"
    with zipfile.ZipFile(mmlspark.jar_path()) as zf:
        assert f"version={mmlspark.__version__}" in zf.read("mmlspark/build.properties").decode()
        services = zf.read("META-INF/services/org.apache.spark.ml.Transformer").decode()
    assert "mmlspark.stages.SelectColumns" in services
    pom = Path(f"{artifact}.pom").read_text()
    assert "<artifactId>opencv</artifactId>" in pom
    assert f"<artifactId>onnxruntime</artifactId><version>{mmlspark.onnxruntime_version}" in pom
    assert "scala-library" not in pom and "org.apache.spark" not in pom


def test_spark_conf_picks_the_jar_of_the_spark_line():
    """Spark 3.5 gets the Scala 2.12 jar, every 4.x line the 2.13 jar, each with its own POM."""
    for spark_version, scala in [("3.5.9", "2.12"), ("4.0.5", "2.13"), ("4.2.1", "2.13")]:
        packages = mmlspark.spark_conf(spark_version=spark_version)["spark.jars.packages"]
        assert packages.startswith(f"mmlspark:mmlspark_{scala}:{mmlspark.__version__}-")
        jar = Path(mmlspark.jar_path(spark_version))
        assert jar.name.startswith(f"mmlspark_{scala}-") and jar.is_file()
        with zipfile.ZipFile(jar) as zf:
            built = zf.read("mmlspark/build.properties").decode()
        assert f"scalaVersion={scala}." in built


@pytest.mark.parametrize("spark_version", ["3.4.4", "4.4.0", "5.0.0"])
def test_unsupported_spark_line_names_the_supported_ones(spark_version):
    with pytest.raises(mmlspark.UnsupportedSparkError) as error:
        mmlspark.spark_conf(spark_version=spark_version)
    message = str(error.value)
    assert spark_version in message
    assert all(line in message for line in mmlspark.spark_lines), message
    assert mmlspark.pyspark_requirement in message


def test_session_with_the_other_lines_jar_is_named(spark, monkeypatch):
    line = mmlspark.spark_line(spark.version)
    monkeypatch.setattr(session_module, "spark_lines", {line: "2.12"})
    monkeypatch.setattr(session_module, "_checked_contexts", set())
    with pytest.raises(mmlspark.VersionMismatchError, match="needs mmlspark's Scala 2.12 jar"):
        session_module.require_jvm_library(spark.sparkContext)


def test_session_joins_user_packages_with_ours(monkeypatch):
    captured = {}

    class Builder:
        def master(self, value):
            return self

        def appName(self, value):
            return self

        def config(self, key, value):
            captured[key] = value
            return self

        def getOrCreate(self):
            raise RuntimeError("stop here")

    import pyspark.sql

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Builder())
    with pytest.raises(RuntimeError, match="stop here"):
        mmlspark.session(conf={"spark.jars.packages": "org.example:lib:1.0"})
    ours = mmlspark.spark_conf()["spark.jars.packages"]
    assert captured["spark.jars.packages"] == f"{ours},org.example:lib:1.0"
    assert os.environ["PYSPARK_PYTHON"]  # workers run a known interpreter


def test_gpu_conf_swaps_onnxruntime_for_its_gpu_build(monkeypatch):
    conf = mmlspark.spark_conf(gpu=True)
    packages = conf["spark.jars.packages"].split(",")
    gpu = f"com.microsoft.onnxruntime:onnxruntime_gpu:{mmlspark.onnxruntime_version}"
    assert packages == mmlspark.spark_conf()["spark.jars.packages"].split(",") + [gpu]
    assert conf["spark.jars.excludes"] == "com.microsoft.onnxruntime:onnxruntime"
    assert "spark.jars.excludes" not in mmlspark.spark_conf()


def test_the_jvm_is_reached_only_through_the_area_facades():
    """JVM classes other than stages are named only in `mmlspark/core/jvm.py` and the areas'
    `_jvm.py` facades, so moving a Scala helper is a one-line change."""
    import re

    root = Path(mmlspark.__file__).resolve().parent
    facades = {root / "core" / "jvm.py", *root.rglob("_jvm.py")}
    assert {p.parent.name for p in facades} >= {"core", "image", "onnx", "camera_trap"}
    raw = re.compile(r"\._jvm\b(?!\.py| import)|\bjvm\.(mmlspark|org\.apache\.hadoop)\b")
    offenders = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path not in facades
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if raw.search(line) and "import" not in line
    ]
    assert offenders == []


def test_methods_that_call_the_jvm_stage_name_what_is_missing(spark):
    from mmlspark.onnx import ONNXModel
    from mmlspark.stages import TimerModel

    timer = TimerModel()
    timer._java_obj = None
    with pytest.raises(RuntimeError, match=rf"TimerModel.lastTransformMillis: {timer.uid} has no"):
        timer.lastTransformMillis()
    model = ONNXModel()
    model._java_obj = None
    with pytest.raises(RuntimeError, match="ONNXModel.getModelInputs"):
        model.getModelInputs()


def test_read_images_checks_the_sample_ratio_before_listing(spark, tmp_path):
    from mmlspark.image import read_images

    for ratio in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"sampleRatio must be in \(0, 1\] but was {ratio}"):
            read_images(spark, str(tmp_path / "missing"), sampleRatio=ratio)
