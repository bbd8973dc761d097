"""The Python backend of the utility stages of ``mmlspark.stages`` against their JVM stages.

Parity is the contract: each case runs one stage on the JVM and a copy of it (the same uid and
params) on the Python backend over the same DataFrame, and the outputs must agree in column
names, types, nullability, metadata and rows; each error must be raised on both with the same
message. The last test runs the Python stages on a Spark Connect server started without the
mmlspark jar, where ``auto`` chooses the Python backend, against the classic session's JVM run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pyspark import StorageLevel
from pyspark.ml.functions import array_to_vector
from pyspark.ml.linalg import DenseVector, SparseVector, Vectors, VectorUDT
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.stages import (
    Cacher,
    ClassBalancer,
    ClassBalancerModel,
    DropColumns,
    EnsembleByKey,
    FixedMiniBatchTransformer,
    FlattenBatch,
    RenameColumn,
    Repartition,
    SelectColumns,
)


def pair(stage: Any) -> tuple[Any, Any]:
    """`stage` (on the JVM) and a copy of it on the Python backend: same uid, same params."""
    python = stage.copy().setBackend("python")
    assert stage.getBackend() == "jvm" and python.getBackend() == "python"
    assert python.uid == stage.uid and python._java_obj is None
    return stage, python


def _plain(value: Any) -> Any:
    if isinstance(value, (DenseVector, SparseVector)):
        return ("vector", [_plain(v) for v in value.toArray().tolist()])
    if isinstance(value, Row):
        return ("row", [_plain(v) for v in value])
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _close(a: Any, b: Any) -> bool:
    """Equal, doubles to 1e-12 relative (Spark's sums of partial aggregates may be added in
    another order)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def assert_same(
    jvm_df: DataFrame | tuple[list[T.StructField], list[Row]],
    py_df: DataFrame,
    *,
    ordered: bool = False,
    key: Callable[[Row], Any] = repr,
    exact: bool = True,
) -> list[Row]:
    """The two outputs agree: every field (name, type, nullability, metadata), then the rows, in
    order or as multisets sorted by `key`; doubles exactly unless not `exact`. The JVM's output
    may come collected: (fields, rows)."""
    if isinstance(jvm_df, tuple):
        jvm_fields, jvm_rows = jvm_df
    else:
        jvm_fields, jvm_rows = jvm_df.schema.fields, jvm_df.collect()
    assert jvm_fields == py_df.schema.fields
    py_rows = py_df.collect()
    if not ordered:
        jvm_rows, py_rows = sorted(jvm_rows, key=key), sorted(py_rows, key=key)
    assert len(jvm_rows) == len(py_rows)
    for e, g in zip(jvm_rows, py_rows, strict=True):
        if exact:
            assert repr(_plain(g)) == repr(_plain(e)), (e, g)
        else:
            assert _close(_plain(g), _plain(e)), (e, g)
    return py_rows


def collected(df: DataFrame) -> tuple[list[T.StructField], list[Row]]:
    """The fields and rows of `df`, to compare with after leaving its session."""
    return df.schema.fields, df.collect()


def assert_fails_alike(jvm_call: Callable[[], Any], py_call: Callable[[], Any]) -> str:
    """Both calls fail with the same message: a ValueError on Python, the JVM's exception (whose
    text holds the message) on the JVM. Returns the message."""
    with pytest.raises(ValueError) as raised:
        py_call()
    message = str(raised.value)
    with pytest.raises(Exception, match=re.escape(message)):
        jvm_call()
    return message


@pytest.fixture(scope="module")
def frame(spark):
    """12 rows as in EnsembleByKeySuite (burst null on the last), with column metadata, a dotted
    name, a sparse vector column and an array column."""
    schema = T.StructType(
        [
            T.StructField("id", T.IntegerType(), False),
            T.StructField("burst", T.StringType()),
            T.StructField("camera", T.IntegerType()),
            T.StructField("p", T.DoubleType()),
            T.StructField("v", VectorUDT()),
            T.StructField("sv", VectorUDT()),
            T.StructField("a.b", T.StringType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("f", T.FloatType()),
            T.StructField("d", T.DecimalType(10, 3)),
        ]
    )
    rows = [
        (
            i,
            None if i == 11 else f"burst{i % 3}",
            i % 2,
            i * 1.5,
            Vectors.dense(float(i), 1.0 / (i + 1)),
            Vectors.sparse(3, {i % 3: float(i)}),
            f"x{i}",
            [f"t{i}"] * (i % 3),
            i / 7.0,
            None if i == 5 else Decimal(i) / 8,
        )
        for i in range(12)
    ]
    df = spark.createDataFrame(rows, schema)
    return df.withColumn("burst", F.col("burst").alias("burst", metadata={"role": "group"}))


# ---------------------------------------------------------------------------------------------
# DropColumns, SelectColumns, RenameColumn


@pytest.mark.parametrize(
    "stage",
    [
        lambda: DropColumns(cols=["v", "a.b"]),
        lambda: DropColumns(cols=[]),
        lambda: SelectColumns(cols=["p", "a.b", "burst"]),
        lambda: RenameColumn(inputCol="a.b", outputCol="renamed x"),
        lambda: RenameColumn(inputCol="burst", outputCol="group"),
        lambda: DropColumns(cols=["zz", "p"]),
        lambda: RenameColumn(inputCol="p", outputCol="p"),
    ],
    ids=[
        "drop",
        "drop-none",
        "select",
        "rename-dotted",
        "rename-keeps-metadata",
        "drop-missing-passed-over",
        "rename-same-name",
    ],
)
def test_column_stages(frame, stage):
    jvm, python = pair(stage())
    out = assert_same(jvm.transform(frame), python.transform(frame))
    assert len(out) == 12


# ---------------------------------------------------------------------------------------------
# Failures when transforming or fitting


def _no_arrays(spark: Any) -> DataFrame:
    """30 columns of assorted types, none an array: the message elides the struct's fields."""
    extra = [F.lit(i).alias(f"c{i}") for i in range(24)]
    return spark.range(2).select(
        "id",
        array_to_vector(F.array(F.lit(1.0))).alias("v"),
        F.struct(F.lit(1).alias("a b"), F.lit("x").alias("c")).alias("s"),
        F.expr("interval 1 day").alias("i"),
        F.expr("cast(1 as decimal(5,2))").alias("d"),
        F.create_map(F.lit("k"), F.lit(1)).alias("m"),
        *extra,
    )


FAILURES = [
    ("drop-unset", lambda: DropColumns(), "param 'cols' must be set"),
    ("select-missing", lambda: SelectColumns(cols=["zz"]), "available columns: [id, burst,"),
    ("select-unset", lambda: SelectColumns(), "param 'cols' must be set"),
    ("rename-unset", lambda: RenameColumn(inputCol="p"), "params 'inputCol' and 'outputCol'"),
    ("rename-missing", lambda: RenameColumn(inputCol="zz", outputCol="q"), "column 'zz' does"),
    ("rename-onto", lambda: RenameColumn(inputCol="p", outputCol="burst"), "'burst' already"),
    ("repartition-unset", lambda: Repartition(), "param 'n' must be set"),
    ("batch-unset", lambda: FixedMiniBatchTransformer(), "requirement failed: "),
    ("ensemble-unset", lambda: EnsembleByKey(keys=["burst"]), "params 'keys' and 'cols' must"),
    (
        "ensemble-colnames",
        lambda: EnsembleByKey(keys=["camera"], cols=["p", "v"], colNames=["x"]),
        "colNames has 1 names but cols has 2 columns",
    ),
    ("ensemble-key", lambda: EnsembleByKey(keys=["zz"], cols=["p"]), "column 'zz' does not"),
    (
        "ensemble-string",
        lambda: EnsembleByKey(keys=["camera"], cols=["burst"]),
        "input column 'burst' must be numeric or vector but was string",
    ),
    (
        "ensemble-array",
        lambda: EnsembleByKey(keys=["camera"], cols=["p", "tags"]),
        "'tags' must be numeric or vector but was array<string>",
    ),
    (
        "ensemble-repeat",
        lambda: EnsembleByKey(keys=["burst", "camera"], cols=["p"], colNames=["burst"]),
        "keys and output columns must be distinct but repeat burst",
    ),
    (
        "ensemble-exists",
        lambda: EnsembleByKey(keys=["burst"], cols=["p"], colNames=["f"], collapseGroup=False),
        "output column 'f' already exists",
    ),
    ("balancer-missing", lambda: ClassBalancer(), "input column 'label' does not exist"),
    (
        "balancer-nested",
        lambda: ClassBalancer(inputCol="tags"),
        "input column 'tags' must be an atomic (non-nested) type but was array<string>",
    ),
    (
        "balancer-output",
        lambda: ClassBalancer(inputCol="burst", outputCol="p"),
        "output column 'p' already exists",
    ),
]


@pytest.mark.parametrize("make, expected", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_failures(frame, make, expected):
    jvm, python = pair(make())
    run = "fit" if isinstance(jvm, ClassBalancer) else "transform"
    message = assert_fails_alike(
        lambda: getattr(jvm, run)(frame), lambda: getattr(python, run)(frame)
    )
    assert expected in message
    # the stage's own name and uid, except in the JVM's use of Scala's `require`
    assert message.startswith(f"{type(jvm).__name__} {jvm.uid}: ") or message == (
        f"requirement failed: {jvm.uid}: param 'batchSize' must be set"
    )


def test_flatten_batch_names_the_schema_and_null_vectors_fail_alike(spark, frame):
    jvm, python = pair(FlattenBatch())
    wide = _no_arrays(spark)
    message = assert_fails_alike(lambda: jvm.transform(wide), lambda: python.transform(wide))
    assert message.endswith(
        "but has only struct<id:bigint,v:vector,s:struct<a b:int,c:string>,i:interval day,"
        "d:decimal(5,2),m:map<string,int>,c0:int,c1:int,c2:int,c3:int,c4:int,c5:int,c6:int,"
        "c7:int,c8:int,c9:int,c10:int,c11:int,c12:int,c13:int,c14:int,c15:int,c16:int,c17:int,"
        "c18:int,... 5 more fields>"
    )
    # the mean of vectors fails on a null vector alike (Spark's Summarizer on both backends)
    with_null = frame.withColumn("v", F.when(F.col("id") != 3, F.col("v")))
    for backend in ("jvm", "python"):
        stage = EnsembleByKey(keys=["camera"], cols=["v"]).setBackend(backend)
        with pytest.raises(Exception, match="MatchError"):
            stage.transform(with_null).collect()


PARAM_VALUES = [
    (SelectColumns, "cols", []),
    (SelectColumns, "cols", ["p", "p"]),
    (DropColumns, "cols", ["p", "id", "p"]),
    (Repartition, "n", 0),
    (EnsembleByKey, "keys", []),
    (EnsembleByKey, "cols", ["p", "p"]),
    (EnsembleByKey, "colNames", ["x", "x"]),
    (EnsembleByKey, "strategy", "median"),
    (FixedMiniBatchTransformer, "batchSize", 0),
    (FixedMiniBatchTransformer, "maxBufferSize", -1),
]


@pytest.mark.parametrize("cls, name, value", PARAM_VALUES)
def test_param_values_are_checked_alike(cls, name, value):
    jvm, python = pair(cls())
    with pytest.raises(ValueError) as on_python:
        python._set(**{name: value})
    with pytest.raises(ValueError) as on_jvm:
        jvm._set(**{name: value})
    assert str(on_python.value) == str(on_jvm.value)
    assert "given invalid value" in str(on_python.value)
    assert not python.isSet(name) and not jvm.isSet(name)


def test_valid_param_values_pass_on_python():
    assert DropColumns().setBackend("python").setCols([]).getCols() == []
    stage = EnsembleByKey().setBackend("python").setParams(keys=["a"], cols=["b"], colNames=[])
    assert stage.getColNames() == ["mean(b)"]
    assert Repartition().setBackend("python").setN(1).getN() == 1


# ---------------------------------------------------------------------------------------------
# Repartition and Cacher


def test_repartition(frame):
    jvm, python = pair(Repartition(n=5))
    jvm_out, py_out = jvm.transform(frame), python.transform(frame)
    assert jvm_out.rdd.getNumPartitions() == py_out.rdd.getNumPartitions() == 5
    assert_same(jvm_out, py_out)
    jvm, python = pair(Repartition(disable=True))  # n unset: not needed when disabled
    parts = frame.rdd.getNumPartitions()
    assert jvm.transform(frame).rdd.getNumPartitions() == parts
    assert python.transform(frame) is frame


def test_cacher(spark, frame):
    df = frame.select("id", "p")
    for disable in (False, True):
        jvm, python = pair(Cacher(disable=disable))
        # one backend at a time: caching marks the plan, which both outputs share
        py_out = python.transform(df)
        py_level = py_out.storageLevel
        df.unpersist()
        jvm_out = jvm.transform(df)
        assert jvm_out.storageLevel == py_level
        assert (py_level == StorageLevel.NONE) == disable
        assert_same(jvm_out, py_out)
        df.unpersist()
    stream = spark.readStream.format("rate").load()
    jvm, python = pair(Cacher())
    assert jvm.transform(stream).isStreaming and python.transform(stream) is stream


# ---------------------------------------------------------------------------------------------
# EnsembleByKey


def _by_keys(*names: str) -> Callable[[Row], Any]:
    return lambda row: repr([row[n] for n in names])


@pytest.mark.parametrize(
    "params, key",
    [
        (dict(keys=["burst", "camera"], cols=["p", "v"]), ("burst", "camera")),
        (
            dict(keys=["burst", "camera"], cols=["p"], colNames=["avgP"], collapseGroup=False),
            ("id",),
        ),
        (
            dict(
                keys=["burst"],
                cols=["v", "f", "d", "camera", "sv"],
                colNames=["mv", "mf", "md", "mc", "msv"],
                collapseGroup=False,
                strategy="mean",
            ),
            ("id",),
        ),
        (dict(keys=["camera"], cols=["sv", "camera", "d"]), ("camera",)),
        (dict(keys=["a.b", "burst"], cols=["v"], collapseGroup=True), ("a.b",)),
    ],
    ids=["suite-collapsed", "suite-kept", "all-value-types-kept", "sparse-and-key", "dotted-key"],
)
def test_ensemble_by_key(frame, params, key):
    jvm, python = pair(EnsembleByKey(**params))
    out = assert_same(
        jvm.transform(frame), python.transform(frame), key=_by_keys(*key), exact=False
    )
    if params.get("collapseGroup", True) is False:
        assert len(out) == 12


def test_ensemble_by_key_gives_the_suites_means(frame):
    """The Python backend's means against plain Python, grouped by (burst, camera)."""
    stage = EnsembleByKey(keys=["burst", "camera"], cols=["p", "v"]).setBackend("python")
    expected: dict[tuple[Any, Any], list[tuple[float, list[float]]]] = {}
    for r in frame.collect():
        expected.setdefault((r["burst"], r["camera"]), []).append((r["p"], r["v"].toArray()))
    for row in stage.transform(frame).collect():
        group = expected.pop((row["burst"], row["camera"]))
        assert row["mean(p)"] == pytest.approx(sum(p for p, _ in group) / len(group), rel=1e-12)
        means = [sum(v[j] for _, v in group) / len(group) for j in range(2)]
        assert row["mean(v)"].toArray().tolist() == pytest.approx(means, rel=1e-12)
    assert expected == {}


# ---------------------------------------------------------------------------------------------
# ClassBalancer and ClassBalancerModel


def _jvm_weights(model: Any) -> dict[Any, float]:
    labels, weights = model._java_obj.labels(), model._java_obj.weights()
    return {_label_key(label): weight for label, weight in zip(labels, weights, strict=True)}


def _py_weights(model: Any) -> dict[Any, float]:
    return {_label_key(label): w for label, w in zip(model._labels, model._weights, strict=True)}


def _label_key(label: Any) -> Any:
    return "NaN" if isinstance(label, float) and math.isnan(label) else label


@pytest.fixture(scope="module")
def labelled(spark):
    """The suite's classes (a: 6 rows, b: 3, c: 1, null: 2) and double labels with NaN, -0.0
    and null."""
    species = ["a"] * 6 + ["b"] * 3 + ["c"] + [None, None]
    scores = [1.0, 1.0, float("nan"), float("nan"), 0.0, -0.0, None, 2.5, 2.5, 2.5, 1.0, 0.0]
    return spark.createDataFrame(
        list(zip(species, range(12), scores, strict=True)), "species string, id int, score double"
    )


@pytest.mark.parametrize(
    "params",
    [
        dict(inputCol="species"),
        dict(inputCol="id", outputCol="w", broadcastJoin=False),
        dict(inputCol="score"),
    ],
    ids=["suite-strings", "ints-no-broadcast", "doubles-nan-negative-zero"],
)
def test_class_balancer(spark, labelled, params):
    jvm, python = pair(ClassBalancer(**params))
    jvm_model, py_model = jvm.fit(labelled), python.fit(labelled)
    assert isinstance(py_model, ClassBalancerModel) and py_model.getBackend() == "python"
    assert py_model._java_obj is None and py_model.uid == jvm_model.uid == jvm.uid
    assert {p.name: v for p, v in py_model.extractParamMap().items()} == {
        p.name: v for p, v in jvm_model.extractParamMap().items()
    }
    weights = _py_weights(py_model)
    assert weights == _jvm_weights(jvm_model)
    n, k = 12.0, float(len(weights))
    column = params["inputCol"]
    counts = labelled.groupBy(column).count().collect()
    assert weights == {_label_key(r[0]): n / (k * r[1]) for r in counts}
    assert_same(jvm_model.transform(labelled), py_model.transform(labelled))
    unseen = labelled.limit(3).union(labelled.limit(1).withColumn("id", F.lit(99)))
    unseen = unseen.withColumn(
        "species", F.when(F.col("id") == 99, "zebra").otherwise(F.col("species"))
    )
    assert_same(jvm_model.transform(unseen), py_model.transform(unseen))
    with pytest.raises(NotImplementedError, match="weight table is saved by the JVM stage"):
        py_model.write()


def test_class_balancer_models_between_backends(labelled):
    jvm_model = ClassBalancer(inputCol="species").fit(labelled)
    py_model = ClassBalancer(inputCol="species").setBackend("python").fit(labelled)
    # a fitted JVM model brings its weights to the Python backend
    moved = jvm_model.copy().setBackend("python")
    assert _py_weights(moved) == _jvm_weights(jvm_model)
    assert moved._label_type == T.StringType()
    assert_same(jvm_model.transform(labelled), moved.transform(labelled))
    with pytest.raises(NotImplementedError, match="fitted on the Python backend"):
        py_model.setBackend("jvm")
    # the model checks its input as the JVM's does
    has_weight = labelled.withColumn("weight", F.lit(1.0))
    assert_fails_alike(lambda: jvm_model.transform(has_weight), lambda: moved.transform(has_weight))
    empty = labelled.limit(0)
    jvm, python = pair(ClassBalancer(inputCol="species"))
    message = assert_fails_alike(lambda: jvm.fit(empty), lambda: python.fit(empty))
    assert message == f"ClassBalancer {jvm.uid}: cannot fit on an empty dataset"


# ---------------------------------------------------------------------------------------------
# FixedMiniBatchTransformer and FlattenBatch


@pytest.fixture(scope="module")
def rows(spark):
    """11 rows in 3 partitions of Spark's own making (the same on every run), with a vector,
    an interval (which the JVM's row encoder widens), a struct, metadata and nulls."""
    return spark.range(0, 11, 1, 3).select(
        F.col("id"),
        F.when(F.col("id") % 4 != 1, F.concat(F.lit("s"), F.col("id"))).alias(
            "s", metadata={"m": 1}
        ),
        array_to_vector(F.array(F.col("id").cast("double"), F.lit(0.5))).alias("v"),
        F.expr("make_dt_interval(id)").alias("i"),
        F.expr("cast(make_dt_interval(id) as interval day)").alias("day"),
        F.struct(F.col("id").alias("x"), F.array(F.col("id")).alias("xs")).alias("st"),
    )


@pytest.mark.parametrize(
    "params",
    [dict(batchSize=4), dict(batchSize=1), dict(batchSize=3, buffered=True), dict(batchSize=50)],
)
def test_fixed_mini_batches(spark, rows, params):
    jvm, python = pair(FixedMiniBatchTransformer(**params))
    batched = assert_same(jvm.transform(rows), python.transform(rows), ordered=True)
    assert sum(len(b["id"]) for b in batched) == 11
    # back to the rows, in their order, on either backend
    flat_jvm, flat_py = pair(FlattenBatch())
    back = assert_same(
        flat_jvm.transform(jvm.transform(rows)),
        flat_py.transform(python.transform(rows)),
        ordered=True,
    )
    assert [r["id"] for r in back] == list(range(11))


def test_fixed_mini_batches_span_arrow_batches(spark, rows):
    jvm, python = pair(FixedMiniBatchTransformer(batchSize=4))
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "3")  # a batch of 4 then spans 2 Arrow batches; 3 ends between them
    try:
        assert_same(jvm.transform(rows), python.transform(rows), ordered=True)
        sparse = spark.range(0, 3, 1, 5)  # empty partitions
        assert_same(jvm.transform(sparse), python.transform(sparse), ordered=True)
    finally:
        spark.conf.set(key, previous)


def test_flatten_batch_of_ragged_and_null_arrays(spark):
    batches = spark.createDataFrame(
        [
            (0, [1, 2, 3], ["a"], "x", [Row(q=1.0)]),
            (1, None, ["b", None, "c"], "y", None),
            (2, [], [], None, []),
            (3, None, None, "z", None),
            (4, [7], None, "w", [Row(q=None), Row(q=2.0)]),
        ],
        "k int, a array<int>, b array<string>, c string, d array<struct<q:double>>",
    ).withColumn("a", F.col("a").alias("a", metadata={"tensorShape": [3]}))
    jvm, python = pair(FlattenBatch())
    out = assert_same(jvm.transform(batches), python.transform(batches), ordered=True)
    assert [r["k"] for r in out] == [0, 0, 0, 1, 1, 1, 4, 4]


# ---------------------------------------------------------------------------------------------
# A Spark Connect server without the jar


def _connect_rows(session: Any) -> DataFrame:
    """The same rows on any session, built by Spark in 3 partitions."""
    return session.range(0, 12, 1, 3).select(
        F.col("id"),
        F.concat(F.lit("burst"), (F.col("id") % 3).cast("string")).alias("burst"),
        (F.col("id") % 2).alias("camera"),
        (F.col("id") * 1.5).alias("p"),
        array_to_vector(F.array(F.col("id").cast("double"), 1.0 / (F.col("id") + 1))).alias("v"),
        F.when(F.col("id") < 7, "a").when(F.col("id") < 10, "b").alias("species"),
    )


def test_on_a_connect_server_without_the_jar(spark, jarless_connect):
    from conftest import connect_mode

    from mmlspark.core.backend import backend_decision

    by_id = _by_keys("id")
    stages: list[tuple[Callable[[], Any], bool, Callable[[Row], Any]]] = [
        (lambda: DropColumns(cols=["v", "p"]), True, repr),
        (lambda: SelectColumns(cols=["p", "burst"]), True, repr),
        (lambda: RenameColumn(inputCol="burst", outputCol="group"), True, repr),
        (lambda: Repartition(n=4), False, by_id),
        (lambda: Cacher(), True, repr),
        (
            lambda: EnsembleByKey(keys=["burst", "camera"], cols=["p", "v"]),
            False,
            _by_keys("burst", "camera"),
        ),
        (lambda: EnsembleByKey(keys=["camera"], cols=["v"], collapseGroup=False), False, by_id),
        (lambda: FixedMiniBatchTransformer(batchSize=5), True, repr),
    ]
    expected = [collected(make().transform(_connect_rows(spark))) for make, _, _ in stages]
    expected_flat = collected(
        FlattenBatch().transform(
            FixedMiniBatchTransformer(batchSize=5).transform(_connect_rows(spark))
        )
    )
    jvm_model = ClassBalancer(inputCol="species").fit(_connect_rows(spark))
    jvm_weights = _jvm_weights(jvm_model)
    expected_weighted = collected(jvm_model.transform(_connect_rows(spark)))
    with connect_mode():
        assert backend_decision(jarless_connect).backend == "python"
        df = _connect_rows(jarless_connect)
        for (make, ordered, key), jvm_out in zip(stages, expected, strict=True):
            stage = make()
            assert stage.getBackend() == "python"
            assert_same(jvm_out, stage.transform(df), ordered=ordered, key=key, exact=False)
        flat = FlattenBatch().transform(FixedMiniBatchTransformer(batchSize=5).transform(df))
        assert_same(expected_flat, flat, ordered=True)
        model = ClassBalancer(inputCol="species").fit(df)
        assert model.getBackend() == "python"
        assert _py_weights(model) == jvm_weights
        assert_same(expected_weighted, model.transform(df))
        stage = SelectColumns(cols=["zz"])
        with pytest.raises(ValueError) as raised:
            stage.transform(df)
    assert str(raised.value) == (
        f"SelectColumns {stage.uid}: input column 'zz' does not exist; available columns: "
        "[id, burst, camera, p, v, species]"
    )
