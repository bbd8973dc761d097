"""Bad input fails early and clearly; mismatched builds are named."""

from __future__ import annotations

import zipfile

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


def test_bundled_jar_of_another_version_is_named_at_import(tmp_path, monkeypatch):
    _fake_jar(tmp_path / "mmlspark_2.13-9.9.9.jar", "9.9.9")
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


def test_spark_conf_names_the_bundled_jar():
    conf = mmlspark.spark_conf()
    assert conf["spark.jars"].endswith(f"mmlspark_2.13-{mmlspark.__version__}.jar")
    with zipfile.ZipFile(conf["spark.jars"]) as zf:
        assert f"version={mmlspark.__version__}" in zf.read("mmlspark/build.properties").decode()
        services = zf.read("META-INF/services/org.apache.spark.ml.Transformer").decode()
    assert "mmlspark.stages.SelectColumns" in services
    packages = conf.get("spark.jars.packages", "")
    assert "org.scala-lang" not in packages and "org.apache.spark" not in packages


def test_spark_conf_adds_listed_maven_packages(tmp_path, monkeypatch):
    _fake_jar(tmp_path / f"mmlspark_2.13-{mmlspark.__version__}.jar", mmlspark.__version__)
    (tmp_path / "packages.txt").write_text("org.example:lib_2.13:1.0\n\norg.example:other:2.0\n")
    monkeypatch.setattr(session_module, "_JARS_DIR", tmp_path)
    conf = mmlspark.spark_conf()
    assert conf["spark.jars.packages"] == "org.example:lib_2.13:1.0,org.example:other:2.0"
    (tmp_path / "packages.txt").write_text("")
    assert "spark.jars.packages" not in mmlspark.spark_conf()
