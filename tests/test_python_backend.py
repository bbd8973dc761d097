"""The Python backend (onnxruntime in Arrow UDFs, no jar) against the JVM stages.

Parity is the contract: each case runs one ONNXModel on the JVM and on the Python backend over
the same DataFrame, and every output column, its type, its ``tensorShape`` metadata and the error
column must agree (ONNX values to rtol 1e-5). The last test runs on a Spark Connect server
started without the mmlspark jar, where ``auto`` must choose the Python backend and give the JVM
run's results, for ONNXModel alone and for photos read, transformed and scored. The image
stages' own parity cases are in ``test_python_images.py``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys

import numpy as np
import onnx_models
import pytest
from onnx import TensorProto
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql import types as T
from pyspark.sql.functions import col

from mmlspark.core import backend as backends
from mmlspark.core.backend import backend_decision, set_backend
from mmlspark.image import read_images
from mmlspark.onnx import ONNXModel
from mmlspark.stages import Timer

RNG = np.random.default_rng(11)


def _values(value):
    if value is None:
        return None
    if isinstance(value, (DenseVector, SparseVector)):
        return ("vector", value.toArray().tolist())
    return value


def assert_same(jvm_df, py_df, keys="id"):
    """Every column of the two outputs agrees: names, types, tensorShape metadata, values."""
    assert jvm_df.columns == py_df.columns
    for a, b in zip(jvm_df.schema.fields, py_df.schema.fields, strict=True):
        assert a.dataType == b.dataType, (a.name, a.dataType, b.dataType)
        assert a.metadata.get("tensorShape") == b.metadata.get("tensorShape"), a.name
    jvm_rows = {r[keys]: r for r in jvm_df.collect()}
    py_rows = {r[keys]: r for r in py_df.collect()}
    assert jvm_rows.keys() == py_rows.keys()
    for key, expected in jvm_rows.items():
        got = py_rows[key]
        for name in jvm_df.columns:
            e, g = _values(expected[name]), _values(got[name])
            if isinstance(e, tuple) or isinstance(e, (list, float)):
                assert g is not None and type(g) is type(e), (key, name, e, g)
                e_arr = np.asarray(e[1] if isinstance(e, tuple) else e, dtype=np.float64)
                g_arr = np.asarray(g[1] if isinstance(g, tuple) else g, dtype=np.float64)
                np.testing.assert_allclose(g_arr, e_arr, rtol=1e-5, atol=1e-6, err_msg=name)
            else:
                assert g == e, (key, name, e, g)


def both(stage_kwargs, payload, df):
    jvm = ONNXModel(**stage_kwargs).setModelPayload(payload)
    python = ONNXModel(**stage_kwargs).setBackend("python").setModelPayload(payload)
    assert jvm.getBackend() == "jvm" and python.getBackend() == "python"
    return jvm.transform(df), python.transform(df)


#: A small CNN's params as a classifier: its image input from `tensor`, its logits, their softmax
#: and their argmax.
CLASSIFIER = dict(
    feedDict={"image": "tensor"},
    fetchDict={"logits": "logits"},
    softMaxDict={"logits": "probability"},
    argMaxDict={"logits": "prediction"},
)


def test_a_cnn_with_softmax_argmax_and_bad_rows(spark):
    model = onnx_models.small_cnn(classes=5, size=8)
    rows = [(i, RNG.normal(size=3 * 8 * 8).astype(np.float32).tolist()) for i in range(40)]
    rows += [(40, None), (41, [1.0] * 100), (42, [1.0, None] + [0.0] * 190)]
    df = spark.createDataFrame(rows, "id int, tensor array<float>").repartition(3)
    kwargs = dict(**CLASSIFIER, miniBatchSize=7)
    jvm_out, py_out = both(kwargs, model, df)
    assert_same(jvm_out, py_out)
    # the model went to the executors once (SparkContext.addFile), not with every task's UDF
    from mmlspark.onnx import _backend

    name = f"mmlspark-model-{hashlib.sha256(model).hexdigest()}.onnx"
    assert (spark.sparkContext.applicationId, name) in _backend._SHIPPED
    errors = {r["id"]: r["onnxError"] for r in py_out.collect()}
    assert errors[0] is None
    assert errors[40] == "input column 'tensor' is null"
    assert "holds 100 values" in errors[41]
    assert errors[42] == "array element 1 is null"
    # and against onnxruntime directly, so that agreement is not agreement in one error
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    first = np.asarray(rows[0][1], dtype=np.float32).reshape(1, 3, 8, 8)
    expected = session.run(["logits"], {"image": first})[0][0]
    got = next(r for r in py_out.collect() if r["id"] == 0)
    np.testing.assert_allclose(got["logits"], expected, rtol=1e-5)
    assert got["prediction"] == float(np.argmax(expected))
    assert isinstance(got["probability"], DenseVector)


SHIPPING_DRIVER = """
import os, signal, sys
from mmlspark.onnx import _backend
folder = _backend._model_folder()
open(os.path.join(folder, "mmlspark-model-x.onnx"), "wb").write(b"model")
print(folder, flush=True)
if sys.argv[1] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.system
def test_the_model_files_a_driver_ships_go_when_it_exits_or_with_the_next_driver(tmp_path):
    """The folder of the model files a driver ships goes when the driver exits; a killed driver's
    folder goes when the next driver makes its own; folders of live processes stay."""
    import os
    import subprocess

    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def driver(how):
        run = subprocess.run(
            [sys.executable, "-c", SHIPPING_DRIVER, how], env=env, capture_output=True, text=True
        )
        return run.stdout.strip()

    exited = driver("exits")
    assert exited.startswith(str(tmp_path)) and not os.path.exists(exited)
    killed = driver("killed")
    assert os.path.isfile(os.path.join(killed, "mmlspark-model-x.onnx"))
    alive = tmp_path / f"mmlspark-models-{os.getpid()}"  # this process's name: a live one
    alive.mkdir()
    other = tmp_path / "mmlspark-models-of-a-user"
    other.mkdir()
    exited = driver("exits")
    assert not os.path.exists(killed) and not os.path.exists(exited)
    assert alive.is_dir() and other.is_dir()


def test_the_model_bytes_go_with_the_stage_to_the_other_backend(spark):
    """A payload set on one backend stays when the stage moves to the other (each holds the bytes
    in its own place: the JVM stage, or the Python object)."""
    import onnxruntime as ort

    model = onnx_models.small_cnn(classes=3, size=4)
    rows = [(RNG.normal(size=3 * 4 * 4).astype(np.float32).tolist(),) for _ in range(3)]
    df = spark.createDataFrame(rows, "tensor array<float>")
    stage = ONNXModel(feedDict={"image": "tensor"}, fetchDict={"logits": "logits"})
    stage.setModelPayload(model).setBackend("python")
    assert stage.getBackend() == "python" and stage.getModelPayload() == model
    got = [r["logits"] for r in stage.transform(df).collect()]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feed = np.asarray([r[0] for r in rows], dtype=np.float32).reshape(3, 3, 4, 4)
    np.testing.assert_allclose(got, session.run(["logits"], {"image": feed})[0], rtol=1e-5)
    stage.setBackend("jvm")
    assert stage.getBackend() == "jvm" and stage.getModelPayload() == model
    again = [r["logits"] for r in stage.transform(df).collect()]
    np.testing.assert_allclose(again, got, rtol=1e-5)


@pytest.mark.parametrize(
    "elem, spark_type, values",
    [
        (TensorProto.INT32, "array<int>", lambda i: [i, -i, 7]),
        (TensorProto.INT64, "array<bigint>", lambda i: [i * 10**12, -i, 3]),
        (TensorProto.DOUBLE, "array<double>", lambda i: [i / 3, -i / 7, 1e-9]),
        (TensorProto.UINT8, "array<int>", lambda i: [i % 256, 255, 0]),
        (TensorProto.INT8, "array<tinyint>", lambda i: [i % 128, -5, 0]),
        (TensorProto.FLOAT16, "array<double>", lambda i: [i * 0.25, 0.1, -3.5]),
        (TensorProto.BOOL, "array<int>", lambda i: [i % 2, 0, 1]),
        (TensorProto.INT16, "array<double>", lambda i: [i + 0.9, -2.7, float("nan")]),
    ],
)
def test_element_types_and_casts(spark, elem, spark_type, values):
    df = spark.createDataFrame([(i, values(i)) for i in range(12)], f"id int, x {spark_type}")
    kwargs = dict(feedDict={"x": "x"}, fetchDict={"same": "same", "half": "as_float"})
    jvm_out, py_out = both(kwargs, onnx_models.typed(elem), df)
    assert_same(jvm_out, py_out)


def test_two_inputs_two_outputs_a_scalar_output_and_fixed_batch(spark):
    df = spark.createDataFrame(
        [(i, [float(i), 1.0, 2.0], [0.5, float(-i), 3.0]) for i in range(9)],
        "id int, a array<float>, b array<double>",
    )
    kwargs = dict(
        feedDict={"a": "a", "b": "b"}, fetchDict={"s": "sum", "p": "product", "t": "total"}
    )
    assert_same(*both(kwargs, onnx_models.two_in_two_out(), df))
    fixed = spark.createDataFrame([(i, [float(i)] * 4) for i in range(5)], "id int, x array<float>")
    assert_same(*both(dict(inputCol="x", outputCol="y"), onnx_models.fixed_batch(), fixed))


def test_vectors_in_and_out(spark):
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("a", VectorUDT())])
    rows = [(0, DenseVector([1.0, 2.0, 3.0])), (1, SparseVector(3, {1: 5.0})), (2, None)]
    df = spark.createDataFrame(rows, schema).withColumn("b", col("a"))
    kwargs = dict(
        feedDict={"a": "a", "b": "b"},
        fetchDict={"s": "sum"},
        softMaxDict={"s": "soft"},
        vectorOutputs=True,
    )
    jvm_out, py_out = both(kwargs, onnx_models.two_in_two_out(), df)
    assert_same(jvm_out, py_out)
    got = {r["id"]: r for r in py_out.collect()}
    assert got[1]["s"].toArray().tolist() == [0.0, 10.0, 0.0]
    assert got[2]["onnxError"] == "input column 'a' is null"


def test_each_python_worker_makes_one_session_per_model_across_tasks(spark):
    model = onnx_models.small_cnn(classes=4, size=8, seed=99)
    digest = hashlib.sha256(model).hexdigest()
    df = spark.createDataFrame(
        [(i, [0.5] * 192) for i in range(24)], "id int, tensor array<float>"
    ).repartition(6)
    stage = ONNXModel(inputCol="tensor", outputCol="logits").setBackend("python")
    stage.setModelPayload(model)
    for _ in range(3):  # 18 tasks
        assert stage.transform(df).filter("onnxError is null").count() == 24

    def made(batches):
        import os

        import pyarrow as pa

        cache = sys.modules.get("_mmlspark_python_backend_sessions")
        keys = [] if cache is None else [k for k in cache.created if k[0] == digest]
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "made": [len(keys)]})

    probes = spark.range(0, 64, numPartitions=16).mapInArrow(made, "pid long, made long")
    per_worker = {r["pid"]: r["made"] for r in probes.collect()}
    # every worker that ran the stage made its session once, whatever the number of its tasks
    assert set(per_worker.values()) <= {0, 1} and 1 in per_worker.values(), per_worker


def test_onnx_runtime_leaves_no_telemetry_files_in_the_temporary_folder(spark):
    """ONNX Runtime writes `mat-debug-<pid>.log` (and `.ses`) into the temporary folder of every
    process that loads it unless its telemetry is off: not in the Spark JVM, nor in the Python
    workers that ran either backend's ONNXModel."""
    import os
    import tempfile
    import time
    from pathlib import Path

    started = time.time() - 1  # a file of a process that had the same pid earlier is older
    model = onnx_models.small_cnn(classes=4, size=8, seed=7)
    df = spark.createDataFrame([(i, [0.5] * 192) for i in range(8)], "id int, tensor array<float>")
    for backend in ("jvm", "python"):
        stage = ONNXModel(inputCol="tensor", outputCol="logits").setBackend(backend)
        assert stage.setModelPayload(model).transform(df).filter("onnxError is null").count() == 8

    def where(batches):
        import os
        import sys
        import tempfile

        import pyarrow as pa

        for _ in batches:
            pass
        loaded = "onnxruntime" in sys.modules
        yield pa.RecordBatch.from_pydict(
            {"pid": [os.getpid()], "tmp": [tempfile.gettempdir()], "loaded": [loaded]}
        )

    probes = spark.range(0, 32, numPartitions=8).mapInArrow(
        where, "pid long, tmp string, loaded boolean"
    )
    workers = {(r["pid"], r["tmp"]) for r in probes.collect() if r["loaded"]}
    assert workers, "no Python worker that ran the Python backend answered"
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    jvm_tmp = spark.sparkContext._jvm.java.lang.System.getProperty("java.io.tmpdir")
    for pid, tmp in workers | {(jvm, jvm_tmp), (jvm, tempfile.gettempdir())}:
        log = Path(tmp) / f"mat-debug-{pid}.log"
        assert not (log.exists() and log.stat().st_mtime >= started), (pid, tmp)
    assert os.environ.get("ORT_DISABLE_TELEMETRY") == "1"  # mmlspark.session() set it


def test_the_engine_runs_on_the_gpu_and_cpus_its_task_was_given(monkeypatch):
    """The engine reads no TaskContext: the task's gpu addresses and CPUs come in a Task
    (mmlspark.core.fused builds it in the worker), and choose the providers and threads. The
    providers are checked by onnxruntime's own normalizer (the one its InferenceSession calls),
    not by their form here: a form it refuses made it fall back to the CPU on a GPU machine."""
    import onnxruntime
    from onnxruntime.capi.onnxruntime_inference_collection import (
        check_and_normalize_provider_args,
    )

    from mmlspark._engine import ort
    from mmlspark._engine.rows import Task
    from mmlspark.onnx._backend import cuda_options

    names = ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def device_of(providers):
        """(provider names, the CUDA provider's options or None) as onnxruntime reads them."""
        found, options = check_and_normalize_provider_args(
            ort._provider_args(providers), None, names
        )
        return found, (options[0] if found[0] == names[0] else None)

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: names[:1])
    stage = ONNXModel(cudnnConvAlgoSearch="HEURISTIC", cudaMemoryLimit=1 << 30)
    options = cuda_options(stage._spec())
    assert device_of(ort._providers("auto", Task(gpus=("3", "1")), options)) == (
        names,
        {"device_id": "3", "cudnn_conv_algo_search": "HEURISTIC",
         "arena_extend_strategy": "kSameAsRequested", "gpu_mem_limit": str(1 << 30)},
    )  # fmt: skip
    assert device_of(ort._providers("auto", Task(gpus=()))) == (names, {"device_id": "0"})
    assert device_of(ort._providers("auto", Task())) == (names[1:], None)  # no gpu given
    assert device_of(ort._providers("cuda", Task()))[1] == {"device_id": "0"}
    assert device_of(ort._providers("cpu", Task(gpus=("1",)))) == (names[1:], None)
    defaults = dict(cuda_options(ONNXModel()._spec()))  # the JVM's defaults, no memory limit
    assert defaults == {"cudnn_conv_algo_search": "EXHAUSTIVE",
                        "arena_extend_strategy": "kSameAsRequested"}  # fmt: skip
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: names[1:])
    assert device_of(ort._providers("auto", Task(gpus=("1",)))) == (names[1:], None)
    with pytest.raises(RuntimeError, match="deviceType is 'cuda' but this onnxruntime has no CUDA"):
        ort._providers("cuda", Task(gpus=("1",)))
    assert [ort._threads(2, Task(cpus=3)), ort._threads(0, Task(cpus=3))] == [2, 3]
    assert [ort._threads(0, Task(cpus=0)), ort._threads(0, Task())] == [1, 1]


def test_a_session_that_did_not_get_the_gpu_fails_instead_of_running_on_the_cpu(monkeypatch):
    """onnxruntime makes a CPU session where the CUDA provider cannot start (here: this build
    has none, though the listing says so); the engine refuses it as the JVM's session fails."""
    import onnxruntime

    from mmlspark._engine import ort
    from mmlspark._engine.rows import Task

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider"])
    model = onnx_models.small_cnn(classes=3, size=4)
    providers = ort._providers("cuda", Task())
    digest = hashlib.sha256(model).hexdigest() + "-cuda-test"
    with pytest.raises(RuntimeError, match=r"could not start CUDAExecutionProvider \(the session "
                       r"has CPUExecutionProvider\).*deviceType to 'cpu'"):  # fmt: skip
        ort._session(model, digest, providers, ("all", 1))
    session = ort._session(model, digest, ort._providers("cpu", Task()), ("all", 1))
    assert session.get_providers() == ["CPUExecutionProvider"]


def test_the_python_workers_tell_the_engine_their_task(spark):
    """What mmlspark.core.fused gives the engine in a worker: the task's CPUs, no gpu (none is
    configured here) and the shipped files' lookup."""

    def probe(batches):
        import os

        import pyarrow as pa

        from mmlspark.core.fused import _task

        task = _task()
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict(
            {
                "cpus": [task.cpus],
                "gpus": [task.gpus is not None],
                "files": [os.path.dirname(task.files("x")) if task.files else None],
            }
        )

    rows = spark.range(0, 4, numPartitions=2).mapInArrow(
        probe, "cpus long, gpus boolean, files string"
    )
    got = rows.collect()
    assert [(r.cpus, r.gpus) for r in got] == [(1, False), (1, False)]
    assert all(r.files for r in got)


@pytest.mark.parametrize(
    "fetch",
    [{"features": "features"}, {"features": "features_node", "logits": "logits"}, {"r": "relu"}],
    ids=["inner-tensor", "node-name-and-output", "4d-inner"],
)
def test_fetching_inner_tensors_cuts_the_model_as_the_jvm_does(spark, fetch):
    model = onnx_models.small_cnn(classes=3, size=6)
    rows = [(i, RNG.normal(size=3 * 6 * 6).astype(np.float32).tolist()) for i in range(9)]
    df = spark.createDataFrame(rows + [(9, [1.0])], "id int, tensor array<float>")
    if "features_node" in fetch.values():
        # a node's name is cut at its output, which then has the tensor's name, not the node's
        for backend in ("jvm", "python"):
            stage = ONNXModel(feedDict={"image": "tensor"}, fetchDict=fetch).setBackend(backend)
            with pytest.raises(Exception, match="fetchDict names model output 'features_node'"):
                stage.setModelPayload(model).transform(df).collect()
        return
    jvm_out, py_out = both(dict(feedDict={"image": "tensor"}, fetchDict=fetch), model, df)
    assert_same(jvm_out, py_out)
    assert py_out.filter("onnxError is null").count() == 9


def test_preflight_errors_name_what_to_do(spark):
    df = spark.createDataFrame([(0, [1.0, 2.0, 3.0])], "id int, x array<float>")
    stage = ONNXModel(feedDict={"x": "x"}, fetchDict={"x": "same"}).setBackend("python")
    stage.setModelPayload(onnx_models.typed(TensorProto.FLOAT))
    with pytest.raises(ValueError, match="output column 'x' already exists"):
        stage.transform(df)
    missing = ONNXModel(feedDict={"nope": "x"}, outputCol="y").setBackend("python")
    missing.setModelPayload(onnx_models.typed(TensorProto.FLOAT))
    with pytest.raises(ValueError, match="feedDict names model input 'nope'"):
        missing.transform(df)
    for backend in ("jvm", "python"):
        cut = ONNXModel(inputCol="x", fetchDict={"y": "nope"}).setBackend(backend)
        cut.setModelPayload(onnx_models.typed(TensorProto.FLOAT))
        with pytest.raises(Exception, match="the model has no node or tensor 'nope'; it has"):
            cut.transform(df)
    assert stage.getModelInputs()["x"]["shape"] == [-1, 3]


def test_backend_setting_is_checked_and_the_session_decision_is_the_jvm(spark):
    with pytest.raises(ValueError, match="backend must be one of"):
        set_backend("gpu")
    decision = backend_decision(spark)
    assert decision.backend == "jvm" and "jar" in decision.reason
    set_backend("python")
    try:
        assert ONNXModel().getBackend() == "python" and Timer().getBackend() == "python"

        class JvmOnly(Timer):  # every stage has a Python backend now: one that has not
            _python_backend = False

        with pytest.raises(NotImplementedError, match="JVM backend only"):
            JvmOnly()
    finally:
        set_backend(None)
    assert ONNXModel().getBackend() == "jvm"


def _server_errors(server) -> list[str]:
    """The errors a Connect server has logged so far (a failed query is logged at INFO, with its
    trace, as "Spark Connect error during: ...")."""
    return [
        x
        for log in server.logs()
        for x in log.read_text().splitlines()
        if " ERROR " in x or "Spark Connect error during" in x
    ]


def _client_errors(probe) -> list[logging.LogRecord]:
    """The records pyspark's Spark Connect client logs at ERROR while `probe` runs (it logs each
    failed call, with the server's trace, wherever SPARK_CONNECT_LOG_LEVEL enables its logger)."""
    from pyspark.sql.connect.logging import logger

    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = records.append  # type: ignore[method-assign]
    disabled, level = logger.disabled, logger.level
    logger.disabled = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        probe()
    finally:
        logger.removeHandler(handler)
        logger.disabled, logger.level = disabled, level
    return records


def test_connect_without_the_jar_runs_on_python_with_the_jvm_results(
    spark, jarless_server, jarless_connect
):
    from conftest import connect_mode

    model = onnx_models.small_cnn(classes=3, size=8)
    rows = [(i, RNG.normal(size=192).astype(np.float32).tolist()) for i in range(20)]
    rows.append((20, [0.0] * 5))
    kwargs = dict(
        inputCol="tensor",
        outputCol="logits",
        softMaxDict={"logits": "probability"},
        argMaxDict={"logits": "prediction"},
    )
    expected = (
        ONNXModel(**kwargs)
        .setModelPayload(model)
        .transform(spark.createDataFrame(rows, "id int, tensor array<float>"))
    )
    expected_rows = expected.collect()
    errors_before = _server_errors(jarless_server)
    probed: list = []
    with connect_mode():
        # The probe itself, whatever was decided before: it fails no query, so neither the
        # client nor the server logs an error for it.
        assert _client_errors(lambda: probed.append(backends._auto(jarless_connect))) == []
        decision = backend_decision(jarless_connect)
    assert _server_errors(jarless_server) == errors_before
    assert decision.backend == "python", decision
    assert decision.reason == probed[0].reason == "the Spark Connect server has no mmlspark jar"
    with connect_mode():
        stage = ONNXModel(**kwargs).setModelPayload(model)
        assert stage.getBackend() == "python"
        df = jarless_connect.createDataFrame(rows, "id int, tensor array<float>")
        got = {r["id"]: r for r in stage.transform(df).collect()}
    # the model went to the server once, as a file artifact, not with every task's UDF
    from mmlspark.onnx import _backend

    name = f"mmlspark-model-{hashlib.sha256(model).hexdigest()}.onnx"
    assert (jarless_connect.session_id, name) in _backend._SHIPPED
    for e in expected_rows:
        g = got[e["id"]]
        assert g["onnxError"] == e["onnxError"]
        if e["logits"] is None:
            assert g["logits"] is None
            continue
        np.testing.assert_allclose(g["logits"], e["logits"], rtol=1e-5)
        np.testing.assert_allclose(
            g["probability"].toArray(), e["probability"].toArray(), rtol=1e-5
        )
        assert g["prediction"] == e["prediction"]


def test_connect_without_the_jar_reads_transforms_and_scores_photos_like_the_jvm(
    spark, jarless_connect, tmp_path
):
    """read_images, ImageTransformer to a tensor and ONNXModel: on a Connect server without the
    jar (auto: Python) the rows equal the classic session's with the jar (JVM)."""
    import cv2
    from conftest import connect_mode
    from image_fixtures import encode, pattern, with_exif_orientation

    from mmlspark.opencv import ImageTransformer

    for i in range(6):
        jpeg = encode(pattern(60 + 7 * i, 90 - 5 * i, seed=i), ".jpg")
        (tmp_path / f"photo{i}.jpg").write_bytes(with_exif_orientation(jpeg, 1 + i))
    (tmp_path / "notes.jpg").write_bytes(b"not a photo")
    ok, png = cv2.imencode(".png", pattern(40, 30, seed=9))
    (tmp_path / "gray.png").write_bytes(png.tobytes())
    model = onnx_models.small_cnn(classes=4, size=16)

    def scored(session):
        photos = read_images(session, str(tmp_path))
        tensors = (
            ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
            .resize(size=20, keepAspectRatio=True)
            .centerCrop(16, 16)
            .normalize(mean=[0.5, 0.4, 0.3], std=[0.2, 0.25, 0.3], colorScaleFactor=1 / 255)
            .transform(photos)
        )
        onnx = ONNXModel(inputCol="tensor", outputCol="logits", argMaxDict={"logits": "label"})
        return onnx.setModelPayload(model).transform(tensors).drop("image")

    expected = {r["path"].rsplit("/", 1)[-1]: r for r in scored(spark).collect()}
    with connect_mode():
        got = {r["path"].rsplit("/", 1)[-1]: r for r in scored(jarless_connect).collect()}
    assert sorted(got) == sorted(expected) and len(got) == 8
    assert (
        expected["notes.jpg"]["error"]
        and got["notes.jpg"]["error"] == expected["notes.jpg"]["error"]
    )
    for name, e in expected.items():
        g = got[name]
        assert (g["error"], g["transformError"], g["onnxError"]) == (
            e["error"],
            e["transformError"],
            e["onnxError"],
        ), name
        if e["tensor"] is None:
            assert g["tensor"] is None and g["logits"] is None, name
            continue
        np.testing.assert_array_equal(np.asarray(g["tensor"]), np.asarray(e["tensor"]), name)
        np.testing.assert_allclose(g["logits"], e["logits"], rtol=1e-5, err_msg=name)
        assert g["label"] == e["label"], name


@pytest.mark.parametrize(
    "settings",
    [
        dict(inputCol="image", featureTensorName="pool", dropNa=False),
        dict(inputCol="content", featureTensorName="pool", ignoreDecodingErrors=True, dropNa=False),
        dict(
            inputCol="content",
            tensorChannelOrder="BGR",
            reducedDecode=False,
            ignoreDecodingErrors=True,
        ),
        dict(inputCol="image", autoConvertToColor=False, dropNa=True),
    ],
    ids=["structs-cut", "bytes-cut-errors-kept", "bytes-whole-model-bgr", "structs-dropna"],
)
def test_image_featurizer_gives_the_jvm_features(spark, settings):
    """The camera-trap demo's featurizer on its photos (and a few bad rows): the same vectors,
    errors and rows on both backends."""
    from importlib.resources import files

    from mmlspark.image import ImageDecoder
    from mmlspark.onnx import ImageFeaturizer

    demo = files("mmlspark.apps.camera_trap") / "demo_data"
    paths = sorted(str(p) for p in (demo / "images").iterdir() for p in p.iterdir())[::6]
    rows = [(p, open(p, "rb").read()) for p in paths] + [("bad", b"not a photo"), ("null", None)]
    files_df = spark.createDataFrame(rows, "path string, content binary")
    df = ImageDecoder(originCol="path", errorCol="decodeError").transform(files_df)
    if settings["inputCol"] == "content":
        df = df.drop("image")
    model = (demo / "featurizer.onnx").read_bytes()

    def featurize(backend):
        stage = ImageFeaturizer(outputCol="features", imageHeight=48, imageWidth=48, **settings)
        return stage.setBackend(backend).setModelPayload(model).transform(df)

    jvm_out, py_out = featurize("jvm"), featurize("python")
    assert jvm_out.columns == py_out.columns
    assert jvm_out.schema["features"].dataType == py_out.schema["features"].dataType
    expected = {r["path"]: r for r in jvm_out.collect()}
    got = {r["path"]: r for r in py_out.collect()}
    assert got.keys() == expected.keys() and len(got) >= 20
    for path, e in expected.items():
        g = got[path]
        assert g["featurizeError"] == e["featurizeError"], path
        if e["features"] is None:
            assert g["features"] is None, path
        else:
            np.testing.assert_allclose(g["features"].toArray(), e["features"].toArray(), rtol=1e-5)
    if not settings.get("dropNa", True):
        assert expected["null"]["featurizeError"] and expected["null"]["features"] is None


def test_image_featurizer_refuses_undecodable_bytes_on_both_backends(spark):
    from mmlspark.onnx import ImageFeaturizer

    df = spark.createDataFrame([(b"not a photo",)], "content binary")
    model = onnx_models.small_cnn(classes=3, size=8)
    for backend in ("jvm", "python"):
        stage = ImageFeaturizer(inputCol="content", imageHeight=8, imageWidth=8)
        stage.setBackend(backend).setModelPayload(model).setFeatureTensorName("features")
        with pytest.raises(Exception, match="an image cannot be decoded .* not a decodable image"):
            stage.transform(df).collect()


def test_a_thread_without_an_active_session_decides_for_the_process_session(spark):
    """A stage made in a thread Spark knows nothing of (the CLI's --wait, a user's pool) runs
    where the process's session can: here the JVM, which has the jar."""
    import threading

    from mmlspark.image import ImageDecoder

    made = []
    worker = threading.Thread(target=lambda: made.append(ImageDecoder().getBackend()))
    worker.start()
    worker.join(timeout=60)
    assert made == ["jvm"]


def test_read_files_takes_a_python_decoder_s_jvm_twin(spark, tmp_path):
    from image_fixtures import encode, pattern

    from mmlspark.image import ImageDecoder, list_files, read_files

    (tmp_path / "a.jpg").write_bytes(encode(pattern(30, 40), ".jpg"))
    decoder = ImageDecoder(colorMode="grayscale").setBackend("python")
    rows = read_files(list_files(spark, str(tmp_path)), decoder).collect()
    shapes = [(r["image"].height, r["image"].width, r["image"].nChannels) for r in rows]
    assert shapes == [(30, 40, 1)] and rows[0]["error"] is None  # the decoder's settings held
    assert decoder.getBackend() == "python"


def test_tensor_shapes_reach_a_model_with_free_dimensions_over_connect(jarless_connect, tmp_path):
    """The tensor metadata (tensorShape) of ImageTransformer and ONNXModel outputs survives Spark
    Connect (whose withColumn drops an alias's metadata), so a model whose input has free height
    and width takes the flat tensors in their shape."""
    import cv2
    from conftest import connect_mode
    from image_fixtures import encode, pattern

    from mmlspark.opencv import ImageTransformer

    for i in range(3):
        (tmp_path / f"{i}.png").write_bytes(encode(pattern(20, 30, seed=i), ".png"))
    free = onnx_models.mean_over_pixels()  # input float[N, 3, ?, ?] -> output float[N, 3]
    with connect_mode():
        photos = read_images(jarless_connect, str(tmp_path))
        tensors = ImageTransformer(inputCol="image", outputCol="t", toTensor=True).resize(8, 12)
        shaped = tensors.transform(photos)
        assert shaped.schema["t"].metadata["tensorShape"] == [3, 8, 12]
        scored = ONNXModel(inputCol="t", outputCol="m").setModelPayload(free).transform(shaped)
        assert scored.schema["m"].metadata["tensorShape"] == [3]
        rows = {r.path.rsplit("/", 1)[1]: r for r in scored.collect()}
    for i in range(3):
        r = rows[f"{i}.png"]
        bgr = cv2.resize(pattern(20, 30, seed=i), (12, 8), interpolation=cv2.INTER_LINEAR)
        expected = bgr[:, :, ::-1].reshape(-1, 3).mean(axis=0)
        np.testing.assert_allclose(r.m, expected, rtol=1e-5)


def _assert_same_with_maps(jvm_df, py_df, maps):
    """assert_same, with the map columns `maps` compared by key, their values to rtol 1e-5 (the
    JVM's ONNX Runtime build and the Python one may differ in the last bits of a float)."""
    assert jvm_df.columns == py_df.columns
    for name in maps:
        a, b = jvm_df.schema[name], py_df.schema[name]
        assert a.dataType == b.dataType, (name, a.dataType, b.dataType)
        assert a.metadata.get("tensorShape") == b.metadata.get("tensorShape") == [], name
    assert_same(jvm_df.drop(*maps), py_df.drop(*maps))
    jvm_rows = {r["id"]: r for r in jvm_df.collect()}
    py_rows = {r["id"]: r for r in py_df.collect()}
    for key, expected in jvm_rows.items():
        for name in maps:
            e, g = expected[name], py_rows[key][name]
            if e is None:
                assert g is None, (key, name, g)
                continue
            assert g is not None and set(g) == set(e), (key, name, e, g)
            assert {k: g[k] for k in e} == pytest.approx(e, rel=1e-5), (key, name)


def _zipmap_rows(spark):
    x = RNG.normal(size=(23, 4)).astype(np.float32)
    rows = [(i, row.tolist()) for i, row in enumerate(x)]
    rows += [(23, [1.0, 2.0, 3.0]), (24, None), (25, [1.0, None, 0.0, 0.0])]
    return x, spark.createDataFrame(rows, "id int, x array<float>").repartition(2)


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("labels", [[10, 20, 30], ["cat", "deer"]], ids=["int64", "string"])
def test_zipmap_outputs_are_the_jvm_map_columns(spark, labels, batch):
    """A classifier converted from scikit-learn: its label and its ZipMap probabilities (one map
    per row, label -> probability) fetched as they are, with a wrong-length, a null and a
    null-element row, whole mini-batches and row by row."""
    model = onnx_models.zipmap_classifier(labels)
    x, df = _zipmap_rows(spark)
    kwargs = dict(
        feedDict={"x": "x"},
        fetchDict={"label": "output_label", "probability": "output_probability"},
        miniBatchSize=batch,
    )
    jvm_out, py_out = both(kwargs, model, df)
    key = "bigint" if isinstance(labels[0], int) else "string"
    assert py_out.schema["probability"].dataType.simpleString() == f"map<{key},float>"
    assert not py_out.schema["probability"].dataType.valueContainsNull
    _assert_same_with_maps(jvm_out, py_out, ["probability"])
    got = {r["id"]: r for r in py_out.collect()}
    assert "holds 3 values" in got[23]["onnxError"] and got[23]["probability"] is None
    assert got[24]["onnxError"] == "input column 'x' is null" and got[24]["label"] is None
    assert got[25]["onnxError"] == "array element 1 is null"
    # and against onnxruntime directly
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want_labels, want_maps = session.run(["output_label", "output_probability"], {"x": x})
    for i in range(len(x)):
        assert got[i]["label"] == want_labels[i] and got[i]["onnxError"] is None
        assert set(got[i]["probability"]) == set(labels)
        assert got[i]["probability"] == pytest.approx(want_maps[i], rel=1e-6)


def test_a_zipmap_model_s_one_output_goes_to_outputcol_and_is_described_like_the_jvm(spark):
    x, df = _zipmap_rows(spark)
    only = onnx_models.zipmap_only_classifier(["a", "b", "c"])
    kwargs = dict(inputCol="x", outputCol="p", miniBatchSize=4)
    jvm_out, py_out = both(kwargs, only, df)
    assert py_out.schema["p"].dataType.simpleString() == "map<string,float>"
    _assert_same_with_maps(jvm_out, py_out, ["p"])
    assert py_out.filter("onnxError is null").count() == 23
    model = onnx_models.zipmap_classifier([10, 20])
    for payload in (only, model):
        jvm = ONNXModel().setModelPayload(payload)
        python = ONNXModel().setBackend("python").setModelPayload(payload)
        assert python.getModelOutputs() == jvm.getModelOutputs()
        assert python.getModelInputs() == jvm.getModelInputs()
    assert python.getModelOutputs()["output_probability"] == {
        "type": "sequence<map<int64,float>>",
        "shape": [],
        "dimNames": [],
    }
    # a map is no array of floats: softmax and argmax refuse it, with the JVM's words
    for param in ("softMaxDict", "argMaxDict"):
        messages = []
        for backend in ("jvm", "python"):
            stage = ONNXModel(
                feedDict={"x": "x"}, fetchDict={"p": "output_probability"}, **{param: {"p": "s"}}
            )
            with pytest.raises(Exception) as refused:
                stage.setBackend(backend).setModelPayload(model).transform(df).collect()
            messages.append(str(refused.value))
        expected = (
            f"{param} needs an array of floating-point values in 'p', but it holds "
            "'output_probability' (sequence<map<int64,float>>[])"
        )
        assert all(expected in m for m in messages), messages


def test_connect_without_the_jar_fetches_zipmap_maps_like_the_jvm(spark, jarless_connect):
    from conftest import connect_mode

    model = onnx_models.zipmap_classifier([3, 1, 2])
    rows = [(i, RNG.normal(size=4).astype(np.float32).tolist()) for i in range(12)]
    rows += [(12, [0.0] * 5), (13, None)]
    kwargs = dict(
        feedDict={"x": "x"},
        fetchDict={"label": "output_label", "probability": "output_probability"},
        miniBatchSize=3,
    )
    jvm_out = (
        ONNXModel(**kwargs)
        .setModelPayload(model)
        .transform(spark.createDataFrame(rows, "id int, x array<float>"))
    )
    expected = {r["id"]: r for r in jvm_out.collect()}
    with connect_mode():
        stage = ONNXModel(**kwargs).setModelPayload(model)
        assert stage.getBackend() == "python"
        out = stage.transform(jarless_connect.createDataFrame(rows, "id int, x array<float>"))
        assert out.schema["probability"].dataType == jvm_out.schema["probability"].dataType
        assert out.schema["probability"].metadata == {"tensorShape": []}
        got = {r["id"]: r for r in out.collect()}
    assert got.keys() == expected.keys()
    for i, e in expected.items():
        g = got[i]
        assert (g["onnxError"], g["label"]) == (e["onnxError"], e["label"]), i
        if e["probability"] is None:
            assert g["probability"] is None, i
            continue
        assert set(g["probability"]) == set(e["probability"]) == {1, 2, 3}
        assert g["probability"] == pytest.approx(e["probability"], rel=1e-5), i
    assert "holds 5 values" in got[12]["onnxError"]


def engine_case(stage, classes: int, rows: int, seed: int):
    """The Python backend's plan for `stage` on a small CNN of `classes` over an array<float>
    column `tensor`, `rows` seeded tensors for it, and onnxruntime's logits of them."""
    import onnxruntime
    from pyspark.sql import types as T

    from mmlspark.onnx._backend import plan as onnx_plan

    model = onnx_models.small_cnn(classes=classes, size=8)
    stage.setBackend("python").setModelPayload(model)
    schema = T.StructType([T.StructField("tensor", T.ArrayType(T.FloatType(), False))])
    tensors = np.random.default_rng(seed).standard_normal((rows, 3 * 8 * 8), dtype=np.float32)
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    expected = session.run(None, {name: tensors.reshape(rows, 3, 8, 8)})[0].reshape(rows, -1)
    return onnx_plan(stage, model, schema), tensors, expected


def test_rows_of_one_shape_go_to_onnxruntime_as_one_array(monkeypatch):
    """Flat tensors of one length are fed straight from the Arrow buffer, a mini-batch per run,
    with no Python value per row; a batch with a row that does not fit is taken row by row, and
    only that row fails. Both give onnxruntime's own outputs."""
    import pyarrow as pa

    from mmlspark._engine import ort
    from mmlspark._engine.rows import Task
    from mmlspark.onnx import ONNXModel

    stage = ONNXModel(inputCol="tensor", outputCol="logits", miniBatchSize=4)
    plan, tensors, expected = engine_case(stage, classes=3, rows=10, seed=3)

    def scored(rows):
        batch = pa.RecordBatch.from_arrays([pa.array(rows, pa.list_(pa.float32()))], ["tensor"])
        out = pa.Table.from_batches(list(ort.partition(plan, iter([batch]), Task(cpus=1))))
        return out.column("logits").to_pylist(), out.column("onnxError").to_pylist()

    def per_row(*args):
        raise AssertionError("a row was taken alone")

    with monkeypatch.context() as m:
        m.setattr(ort, "row_input", per_row)
        logits, errors = scored([list(t) for t in tensors])
    assert errors == [None] * 10
    np.testing.assert_allclose(np.array(logits), expected, rtol=1e-5, atol=1e-6)
    rows = [list(t) for t in tensors]
    rows[6] = rows[6][:-1]  # one value short
    logits, errors = scored(rows)
    assert logits[6] is None and "191 values" in errors[6], errors[6]
    ok = [r for r in range(10) if r != 6]
    assert [errors[r] for r in ok] == [None] * 9
    got = np.array([logits[r] for r in ok])
    np.testing.assert_allclose(got, expected[ok], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("vectors", [False, True], ids=["arrays", "vectors"])
def test_rows_that_all_ran_come_back_without_a_python_value_per_row(monkeypatch, vectors):
    """Where every row of a batch ran, each output column (fetched, softmax, argmax, error) is
    built from whole arrays, and equals what the row-by-row build gives: onnxruntime's logits,
    scipy's softmax, numpy's argmax."""
    import pyarrow as pa
    from scipy.special import softmax

    from mmlspark._engine import ort
    from mmlspark._engine.rows import Task
    from mmlspark.onnx import ONNXModel

    stage = ONNXModel(**CLASSIFIER, miniBatchSize=4, vectorOutputs=vectors)
    plan, tensors, expected = engine_case(stage, classes=5, rows=11, seed=5)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(list(tensors), pa.list_(pa.float32()))], ["tensor"]
    )

    def per_row(*args):
        raise AssertionError("the rows were built one by one")

    with monkeypatch.context() as m:
        m.setattr(ort, "_output_batch", per_row)
        (fast,) = list(ort.partition(plan, iter([batch]), Task(cpus=1)))
    outputs = [expected.astype(np.float32)]
    rows = [[outputs[0][r]] for r in range(11)]
    assert fast.equals(ort._uniform_batch(plan, batch, outputs))
    slow = ort._output_batch(plan, batch, rows, [None] * 11)
    assert fast.schema == slow.schema
    for column in ("logits", "probability", "prediction", "onnxError"):
        np.testing.assert_allclose(
            np.array(fast.column(column).to_pylist(), dtype=float),
            np.array(slow.column(column).to_pylist(), dtype=float),
            rtol=1e-6,
            err_msg=column,
        )
    np.testing.assert_allclose(fast.column("logits").to_pylist(), expected, rtol=1e-5, atol=1e-6)
    probability = np.array(fast.column("probability").to_pylist())
    np.testing.assert_allclose(probability, softmax(expected.astype(np.float64), axis=1), rtol=1e-5)
    assert fast.column("prediction").to_pylist() == np.argmax(expected, axis=1).tolist()
    assert fast.column("onnxError").to_pylist() == [None] * 11


def test_a_model_on_plain_columns_sends_python_only_its_inputs(spark):
    """An ONNXModel that starts no chain runs as an Arrow UDF over its input columns where Spark
    has them (4.1 on): the other columns stay in the JVM and only the outputs come back; the
    outputs are onnxruntime's either way."""
    import onnx_models
    import onnxruntime
    import pyspark

    model = onnx_models.two_in_two_out()
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((6, 3), dtype=np.float32) for _ in range(2))
    rows = [(i, f"note {i}", a[i].tolist(), b[i].tolist()) for i in range(6)]
    df = spark.createDataFrame(rows, "id long, note string, a array<float>, b array<float>")
    stage = ONNXModel(feedDict={"a": "a", "b": "b"}, fetchDict={"s": "sum", "p": "product"})
    out = stage.setBackend("python").setModelPayload(model).transform(df)
    assert out.columns[:4] == ["id", "note", "a", "b"] and out.columns[-1] == "onnxError"
    assert sorted(out.columns[4:-1]) == ["p", "s"]
    plan = str(out._jdf.queryExecution().optimizedPlan().toString())
    if tuple(int(v) for v in pyspark.__version__.split(".")[:2]) >= (4, 1):
        assert "MapInArrow" not in plan and plan.count("ArrowEvalPython") == 1, plan
        sent = re.search(r"ArrowEvalPython \[columns\(([^)]*)\)", plan)
        assert sent is not None, plan
        assert [c.split("#")[0] for c in sent.group(1).split(", ")] == ["a", "b"], plan
    else:
        assert "MapInArrow" in plan, plan
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    expected_sum, expected_product, _ = session.run(None, {"a": a, "b": b})
    got = sorted(out.collect(), key=lambda r: r["id"])
    assert [r["note"] for r in got] == [f"note {i}" for i in range(6)]
    assert all(r["onnxError"] is None for r in got)
    np.testing.assert_allclose([r["s"] for r in got], expected_sum, rtol=1e-6)
    np.testing.assert_allclose([r["p"] for r in got], expected_product, rtol=1e-6)
