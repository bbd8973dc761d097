"""The explainers on the Python backend: the JVM's plan (``mmlspark.explainers.Explaining``) in
pyspark's DataFrame operations, which run on classic and Spark Connect sessions alike. Each row's
samples are rows of one DataFrame scored by one ``model.transform``; each (row, target class)
group's local fit is solved by the engine (``mmlspark._engine.explain``) in an Arrow UDF.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine import explain
from mmlspark._engine.messages import row_message
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import (
    fail,
    is_numeric,
    is_vector,
    quoted,
    require,
    require_absent,
    require_column,
    require_column_type,
    require_distinct,
)

PREFIX = "__explain_"
ID, SAMPLE, MASK = PREFIX + "id", PREFIX + "sample", PREFIX + "mask"
CLASSES, REP = PREFIX + "classes", PREFIX + "rep"
#: The seed of the random draws, the JVM's (Explaining.Seed).
SEED = 1234

FIT_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("k", T.IntegerType()),
        T.StructField("coefficients", T.ArrayType(T.DoubleType())),
        T.StructField("r2", T.DoubleType()),
    ]
)


def col(name: str) -> Column:
    return F.col(quoted(name))


def is_target(data_type: T.DataType) -> bool:
    return (
        is_vector(data_type)
        or (isinstance(data_type, T.ArrayType) and is_numeric(data_type.elementType))
        or is_numeric(data_type)
    )


def model_of(stage: Any, spec: Any) -> Any:
    """The model the stage explains: a Transformer, named in the JVM's words otherwise."""
    from pyspark.ml.base import Transformer

    require(stage, spec.model is not None, row_message("explainerNoModel"))
    if not isinstance(spec.model, Transformer):
        held = getattr(spec.model, "_java_class_name", None) or type(spec.model).__name__
        fail(stage, row_message("notTransformer", param="model", held=held))
    return spec.model


def check_common(stage: Any, spec: Any, data: DataFrame) -> T.StructType:
    """The JVM's checks (ExplainerParams.checkCommon) before any job; the output schema."""
    schema = data.schema
    require_absent(stage, schema, spec.outputCol)
    require_absent(stage, schema, spec.metricsCol)
    require(
        stage,
        spec.outputCol != spec.metricsCol,
        row_message("sameOutputs", column=spec.outputCol),
    )
    classes = spec.targetClasses or ()
    require(
        stage,
        all(c >= 0 for c in classes),
        row_message("negativeClasses", classes=", ".join(map(str, classes))),
    )
    if spec.targetClassesCol is not None:
        require_column_type(
            stage,
            schema,
            spec.targetClassesCol,
            row_message("classesType"),
            lambda t: isinstance(t, T.ArrayType) and isinstance(t.elementType, T.IntegerType),
        )
    scored = model_of(stage, spec).transform(data.limit(0)).schema  # analysed, not run
    require_column_type(
        stage,
        scored,
        spec.targetCol,
        row_message("targetType"),
        is_target,
    )
    return T.StructType(
        [
            *schema.fields,
            T.StructField(spec.outputCol, T.ArrayType(VectorUDT(), containsNull=False)),
            T.StructField(spec.metricsCol, VectorUDT()),
        ]
    )


def require_input_cols(stage: Any, spec: Any, schema: T.StructType) -> list[str]:
    cols = list(spec.inputCols or ())
    require(stage, bool(cols), row_message("explainNoInputCols"))
    require_distinct(stage, "inputCols", cols)
    for c in cols:
        require_column(stage, schema, c)
    return cols


def require_vector_col(stage: Any, spec: Any, schema: T.StructType) -> str:
    require(stage, spec.inputCol is not None, row_message("explainNoInputCol"))
    require_column_type(stage, schema, spec.inputCol, row_message("explainedVector"), is_vector)
    return str(spec.inputCol)


def vector_input(stage: Any, spec: Any, dataset: DataFrame) -> tuple[str, DataFrame]:
    """A vector explainer's checks before any job (``VectorInput.checkedInput``): the vector
    column's name and the background, whose column is a vector too."""
    name = require_vector_col(stage, spec, dataset.schema)
    check_common(stage, spec, dataset)
    require_batch(stage, dataset)
    background = require_background(stage, stage.getBackgroundData())
    require_column_type(stage, background.schema, name, row_message("explainedVector"), is_vector)
    return name, background


def require_batch(stage: Any, data: DataFrame) -> None:
    require(
        stage,
        not data.isStreaming,
        row_message("explainStreaming"),
    )


def require_background(stage: Any, background: DataFrame | None) -> DataFrame:
    require(
        stage,
        background is not None,
        row_message("noBackground"),
    )
    assert background is not None
    return background


def _classes(spec: Any) -> Column:
    if spec.targetClassesCol is not None:
        return col(spec.targetClassesCol)
    return F.array(*[F.lit(c) for c in (spec.targetClasses or (0,))])


def targets(spec: Any, scored: DataFrame) -> Column:
    target = col(spec.targetCol)
    kind = scored.schema[spec.targetCol].dataType
    if is_vector(kind):
        values = vector_to_array(target)
        return F.transform(col(CLASSES), lambda c: F.element_at(values, c + 1))
    if isinstance(kind, T.ArrayType):
        return F.transform(col(CLASSES), lambda c: F.element_at(target, c + 1).cast("double"))
    return F.array(target.cast("double"))


def indexed(spec: Any, data: DataFrame) -> DataFrame:
    return data.withColumn(ID, F.monotonically_increasing_id()).withColumn(CLASSES, _classes(spec))


def score(spec: Any, samples: DataFrame, keep: Sequence[str]) -> DataFrame:
    scored = spec.model.transform(samples)
    kept = [col(ID), col(SAMPLE), *[col(k) for k in keep]]
    return scored.select(*kept, targets(spec, scored).alias("t")).select(
        *kept, F.posexplode(col("t")).alias("k", "y")
    )


def output(spec: Any, data: DataFrame, fits: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The rows of `data` joined with their fits (the JVM's Explaining.output), and the columns
    `extra` of the fits (the same for every class of a row)."""

    def by_class(left: Column, right: Column) -> Column:
        return F.when(left["k"] < right["k"], -1).when(left["k"] > right["k"], 1).otherwise(0)

    per_row = (
        fits.select(
            F.col("id").alias(ID),
            "k",
            array_to_vector(F.col("coefficients")).alias("v"),
            "r2",
            *[col(e) for e in extra],
        )
        .groupBy(col(ID))
        .agg(
            F.array_sort(F.collect_list(F.struct("k", "v", "r2")), by_class).alias("fits"),
            *[F.first(col(e)).alias(e) for e in extra],
        )
        .select(
            col(ID),
            F.transform(F.col("fits"), lambda f: f["v"]).alias(spec.outputCol),
            array_to_vector(F.transform(F.col("fits"), lambda f: f["r2"])).alias(spec.metricsCol),
            *[col(e) for e in extra],
        )
    )
    return data.join(per_row, on=ID, how="left").drop(ID, CLASSES)


def complete(indexed: DataFrame, inputs: Sequence[str]) -> DataFrame:
    """The rows explained: those whose `inputs` are all present (the others get null outputs)."""
    return indexed.filter(functools.reduce(Column.__and__, [col(c).isNotNull() for c in inputs]))


def shap(
    spec: Any,
    data: DataFrame,
    features: int,
    required: Sequence[str],
    background: DataFrame,
    mix: Callable[[Column], list[tuple[str, Column]]],
) -> DataFrame:
    """Kernel SHAP for every row (Explaining.shap): the rows x coalitions x background rows,
    scored at once, averaged over the background, and solved per row and class."""
    samples = spec.numSamples if spec.numSamples is not None else explain.default_samples(features)
    coalitions = explain.coalitions(features, samples, SEED)
    spark = data.sparkSession
    masks = spark.createDataFrame(
        [(i, [float(v) for v in m]) for i, m in enumerate(coalitions.masks)],
        T.StructType(
            [
                T.StructField(SAMPLE, T.IntegerType()),
                T.StructField(MASK, T.ArrayType(T.DoubleType())),
            ]
        ),
    )
    rows = indexed(spec, data)
    mixed = (
        complete(rows, required).crossJoin(F.broadcast(masks)).crossJoin(F.broadcast(background))
    )
    for name, column in mix(col(MASK)):
        mixed = mixed.withColumn(name, column)
    inputs = mixed.drop(MASK, *background.columns)
    averaged = (
        score(spec, inputs, []).groupBy(col(ID), F.col("k"), col(SAMPLE)).agg(F.avg("y").alias("y"))
    )
    grouped = averaged.groupBy(F.col(ID).alias("id"), F.col("k")).agg(
        F.collect_list(col(SAMPLE)).alias("samples"), F.collect_list("y").alias("ys")
    )
    fits = map_in_arrow(grouped, functools.partial(explain.shap_partition, coalitions), FIT_SCHEMA)
    return output(spec, rows, fits)


def lime(
    spec: Any,
    data: DataFrame,
    features: int,
    required: Sequence[str],
    sampled: list[tuple[str, Column]],
    categorical: Sequence[bool],
) -> DataFrame:
    """LIME for every row (Explaining.lime): numSamples samples per row (the first is the row),
    scored at once, and each (row, class)'s weighted ridge fit solved."""
    width = spec.kernelWidth if spec.kernelWidth is not None else 0.75 * math.sqrt(features)
    plan = explain.LimePlan(tuple(categorical), float(width), float(spec.regularization))
    return lime_of(spec, data, required, sampled, plan)


def lime_of(
    spec: Any,
    data: DataFrame,
    required: Sequence[str],
    sampled: list[tuple[str, Column]],
    plan: explain.LimePlan,
) -> DataFrame:
    """LIME as :func:`lime` does it, with the engine's `plan` (Explaining.limeOf)."""
    rows = indexed(spec, data)
    samples = complete(rows, required).withColumn(
        SAMPLE, F.explode(F.sequence(F.lit(0), F.lit(spec.numSamples - 1)))
    )
    for name, column in sampled:
        samples = samples.withColumn(name, column)
    grouped = (
        score(spec, samples, [REP])
        .groupBy(F.col(ID).alias("id"), F.col("k"))
        .agg(F.flatten(F.collect_list(col(REP))).alias("reps"), F.collect_list("y").alias("ys"))
    )
    fits = map_in_arrow(grouped, functools.partial(explain.lime_partition, plan), FIT_SCHEMA)
    return output(spec, rows, fits)


def normal(j: int) -> Column:
    """A standard normal draw per sample for feature `j`, 0 for the row itself (the JVM's)."""
    return F.when(col(SAMPLE) == 0, F.lit(0.0)).otherwise(F.randn(SEED + j))


def uniform(j: int) -> Column:
    return F.rand(SEED + 10007 + j)
