"""What every Spark line must give alike (pytest -m lines; scripts/spark_lines.py runs these with
the other files' `lines` tests on each line, in a virtualenv with that line's pyspark and the
wheel installed).

Results travel between lines through the folder MMLSPARK_LINES_EXCHANGE (one subfolder per line):
each line runs the camera-trap demo and saves a fitted TrainClassifier pipeline there, then checks
the primary line's: the same predictions, and the primary line's saved models load here and give
this line's results. Then the primary line checks every line's: the last run of
scripts/spark_lines.py (make test-lines), with MMLSPARK_LINES_REQUIRE naming the lines that must
be present, or, where the primary suite runs beside the line runs (make test), the suite's last
test, once they have all ended (`test_every_line_s_results_hold_on_the_primary_line`). Without an
exchange folder the tests use a temporary one, so they still save, load and compare on the one
line.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.functions import vector_to_array
from spark_lines import LINES_DONE  # scripts/, on the path by conftest

import mmlspark
from mmlspark._version import tested_pyspark
from mmlspark.apps.camera_trap import job
from mmlspark.core.compat import connect_ml_supported
from mmlspark.train import TrainClassifier

pytestmark = pytest.mark.lines

#: How long the primary suite's last test waits for it, beyond the suite's own time.
LINES_WAIT_SECONDS = 1200

LINE = mmlspark.spark_line()
PRIMARY = mmlspark.spark_line(mmlspark.spark_version)
REQUIRED = [x for x in os.environ.get("MMLSPARK_LINES_REQUIRE", "").split(",") if x]


@pytest.fixture(scope="module")
def exchange(tmp_path_factory) -> Path:
    folder = os.environ.get("MMLSPARK_LINES_EXCHANGE")
    return Path(folder) if folder else tmp_path_factory.mktemp("exchange")


def _others(exchange: Path, name: str, required: list[str]) -> dict[str, Path]:
    """The primary line's saved `name` folder (a line's own run loads what the primary line
    saved); in the checking run on the primary line, every required line's."""
    found = {
        p.name: p / name
        for p in sorted(exchange.iterdir())
        if p.name != LINE and (required or p.name == PRIMARY) and (p / name / "done").is_file()
    }
    missing = [x for x in required if x != LINE and x not in found]
    assert not missing, f"no {name} results from Spark {', '.join(missing)} in {exchange}"
    return found


def _fresh(exchange: Path, name: str, required: list[str]) -> Path:
    """This line's folder for `name`: made anew, except in the checking run, which reads it."""
    own = exchange / LINE / name
    if required:
        assert (own / "done").is_file(), f"Spark {LINE} left no {name} results in {exchange}"
        return own
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir(parents=True)
    return own


def _predictions(folder: Path) -> list[dict[str, Any]]:
    """Camera-trap predictions keyed by the photo's path below the classified folder."""
    rows = pq.read_table(folder / "predictions.parquet").to_pylist()
    for r in rows:
        r["path"] = r["path"].split("/data/test/", 1)[1]
    return sorted(rows, key=lambda r: r["path"])


def _assert_same_predictions(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [r["path"] for r in actual] == [r["path"] for r in expected]
    for a, e in zip(actual, expected, strict=True):
        assert (a["predicted_label"], a["failure"]) == (e["predicted_label"], e["failure"]), a
        assert a["confidence"] == pytest.approx(e["confidence"], rel=1e-6, abs=1e-9), a


def test_the_jvm_runs_the_java_the_line_run_asked_for(spark):
    """scripts/spark_lines.py says which JDK a run is on (MMLSPARK_LINES_JAVA); the JVM agrees."""
    java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    expected = os.environ.get("MMLSPARK_LINES_JAVA")
    if expected:
        assert java.split(".")[0] == expected, java
    else:
        assert int(java.split(".")[0]) >= 17, java


def test_camera_trap_demo_gives_the_same_predictions_on_every_line(spark, exchange, request):
    _same_demo_predictions(spark, exchange, REQUIRED, request)


def _same_demo_predictions(spark: Any, exchange: Path, required: list[str], request: Any) -> None:
    own = _fresh(exchange, "demo", required)
    if not required:
        summary, _, demo = request.getfixturevalue("demo_run")
        assert summary["accuracy"] > 0.8  # chance is 1/3
        shutil.copytree(demo, own / "run")
        (own / "done").write_text(json.dumps({"spark": spark.version, **summary}, default=str))
    mine = _predictions(own / "run" / "predictions")
    assert len(mine) == 30
    for line, theirs in _others(exchange, "demo", required).items():
        # The same photos and featurizer give the same predictions on that line...
        _assert_same_predictions(_predictions(theirs / "run" / "predictions"), mine)
        # ...and the model that line trained and saved loads here and classifies alike.
        out = own / f"with_model_of_{line}"
        shutil.rmtree(out, ignore_errors=True)
        job.classify(
            spark,
            str(own / "run" / "data" / "test"),
            str(theirs / "run" / "model"),
            str(out),
            log=lambda _: None,
        )
        _assert_same_predictions(_predictions(out), _predictions(theirs / "run" / "predictions"))


def test_the_python_backend_classifies_as_the_jvm_on_every_line(spark, exchange, tmp_path):
    """The demo's model (trained on the JVM) classifies the held-out photos on this line's Python
    backend, the photos listed by binaryFile and read, featurized and scored in the Python
    workers, with the classes the JVM gave them. On Spark 3.5 with JDK 21, whose Arrow cannot
    run, the rows reach the Python workers pickled (mmlspark.core.arrow_map)."""
    from mmlspark.core.arrow_map import transfer_of

    run = exchange / LINE / "demo" / "run"
    assert (run / "predictions").is_dir(), f"no demo run of Spark {LINE} in {exchange}"
    on_java_21 = os.environ.get("MMLSPARK_LINES_JAVA") == "21"
    assert transfer_of(spark) == ("rows" if LINE == "3.5" and on_java_21 else "arrow")
    out = tmp_path / "python"
    mmlspark.set_backend("python")
    try:
        job.classify(spark, str(run / "data" / "test"), str(run / "model"), str(out), log=print)
    finally:
        mmlspark.set_backend(None)
    actual, expected = _predictions(out), _predictions(run / "predictions")
    assert [r["path"] for r in actual] == [r["path"] for r in expected]
    for a, e in zip(actual, expected, strict=True):
        assert (a["predicted_label"], a["failure"]) == (e["predicted_label"], e["failure"]), a
        assert a["confidence"] == pytest.approx(e["confidence"], abs=1e-3), a  # features: 1e-5


def _tabular(spark: Any) -> Any:
    rows = [
        (float(i % 7), f"c{i % 3}", float(i % 5) / 2, "yes" if (i % 7 + i % 3) > 4 else "no")
        for i in range(120)
    ]
    return spark.createDataFrame(rows, "a double, color string, b double, label string")


def _scored(model: PipelineModel, df: Any) -> list[dict[str, Any]]:
    out = model.transform(df).select(
        "a", "color", "b", vector_to_array("probability").alias("probability"), "prediction"
    )
    return [r.asDict() for r in out.orderBy("a", "color", "b").collect()]


def test_saved_pipeline_loads_on_every_line_with_the_same_output(spark, exchange):
    _same_pipeline_output(spark, exchange, REQUIRED)


def _same_pipeline_output(spark: Any, exchange: Path, required: list[str]) -> None:
    own = _fresh(exchange, "pipeline", required)
    df = _tabular(spark)
    if not required:
        train = TrainClassifier(model=LogisticRegression(maxIter=30), labelCol="label")
        fitted = Pipeline(stages=[train]).fit(df)
        fitted.write().overwrite().save(str(own / "model"))
        (own / "scored.json").write_text(json.dumps(_scored(fitted, df)))
        (own / "done").write_text(spark.version)
    mine = json.loads((own / "scored.json").read_text())
    assert len(mine) == 120 and {r["prediction"] for r in mine} == {"yes", "no"}
    for _, theirs in _others(exchange, "pipeline", required).items():
        loaded = PipelineModel.load(str(theirs / "model"))
        expected = json.loads((theirs / "scored.json").read_text())
        actual = _scored(loaded, df)
        assert [r["prediction"] for r in actual] == [r["prediction"] for r in expected]
        for a, e in zip(actual, expected, strict=True):
            assert a["probability"] == pytest.approx(e["probability"], rel=1e-9, abs=1e-12)


@pytest.mark.last_in_primary_suite
def test_every_line_s_results_hold_on_the_primary_line(spark, exchange, request):
    """The checking run of the matrix, as the primary suite's last test (make test; conftest
    collects it only there): once scripts/spark_lines.py has run every other line beside this
    suite and said which ran (LINES_DONE in the exchange folder), every line's demo predictions
    equal this line's, every line's saved models load here and classify alike, and every line's
    saved pipeline gives its output here."""
    done = exchange / LINES_DONE
    deadline = time.monotonic() + LINES_WAIT_SECONDS
    while not done.is_file():
        assert time.monotonic() < deadline, (
            f"the other lines' runs left no {done} in {LINES_WAIT_SECONDS} s; did "
            "scripts/spark_lines.py stop?"
        )
        time.sleep(2)
    exit_codes = json.loads(done.read_text())["exit_codes"]
    failed = {run: code for run, code in exit_codes.items() if code != 0}
    assert not failed, f"line runs failed (exit codes): {failed}"
    required = list(tested_pyspark)
    _same_demo_predictions(spark, exchange, required, request)
    _same_pipeline_output(spark, exchange, required)


if not connect_ml_supported():

    def test_stages_on_spark_35_fail_clearly_over_connect():
        """Spark 3.5's Connect server runs no JVM ML stages (4.x lines do: test_connect.py's
        round trip runs on each): a stage with a Python backend runs there (every stage has one),
        a stage without one would say so instead of failing in py4j, and the training stages,
        whose Python backend runs pyspark's learners (which a 3.5 Connect client cannot), say
        that before any job."""
        from conftest import connect_mode

        from mmlspark.core.wrapper import ConnectNotSupportedError
        from mmlspark.stages import SelectColumns
        from mmlspark.train import ComputeModelStatistics, TrainClassifier
        from mmlspark.train.training import require_learners_run

        class JvmOnly(SelectColumns):
            _python_backend = False

        with connect_mode():
            assert SelectColumns(cols=["a"]).getBackend() == "python"
            assert ComputeModelStatistics().getBackend() == "python"
            trainer = TrainClassifier()
            assert trainer.getBackend() == "python"
        with connect_mode(), pytest.raises(ConnectNotSupportedError, match="Spark 4.0 or newer"):
            JvmOnly()
        with connect_mode(), pytest.raises(ConnectNotSupportedError, match="Spark 4.0 and newer"):
            require_learners_run(trainer)
