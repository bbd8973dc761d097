"""What the statistics stages share on the Python backend: the score metadata the trained models
write, how the label, prediction and score columns are found by it (the JVM's ``MetricParams``
and ``ScoreMetadata``), and the metrics themselves, computed as ``ComputeModelStatistics``
computes them on the JVM.

Each metric is one Spark job whose small result (the confusion counts, the positives and
negatives at each distinct score, five sums) comes to the driver, where the rest is plain
arithmetic in the JVM stage's order. Doubles agree with the JVM's to rounding: its sums over
Spark's partitions add in another order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pyspark.ml.functions import vector_to_array
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import is_vector, quoted, require, require_column, require_column_type
from mmlspark.train.training import listed

__all__ = [
    "SCORE_KEY",
    "classes",
    "classification_metrics",
    "java_double",
    "regression_metrics",
    "roc_curve",
    "score_metadata",
]

#: The metadata key under which a trained model's output columns say what they are.
SCORE_KEY = "mmlspark.score"

CLASSIFICATION_SCHEMA = T.StructType(
    [T.StructField(n, T.DoubleType()) for n in ("accuracy", "precision", "recall", "f1", "AUC")]
    + [
        T.StructField("labels", T.ArrayType(T.StringType(), False)),
        T.StructField("precision_per_class", T.ArrayType(T.DoubleType(), False)),
        T.StructField("recall_per_class", T.ArrayType(T.DoubleType(), False)),
        T.StructField("f1_per_class", T.ArrayType(T.DoubleType(), False)),
        T.StructField("confusion_matrix", T.ArrayType(T.ArrayType(T.LongType(), False), False)),
    ]
)

REGRESSION_SCHEMA = T.StructType(
    [
        T.StructField(n, T.DoubleType())
        for n in ("mean_squared_error", "root_mean_squared_error", "r2", "mean_absolute_error")
    ]
)


def score_metadata(role: str, kind: str, label_col: str) -> dict[str, Any]:
    """The score metadata of a trained model's output column (``ScoreMetadata.apply``)."""
    return {SCORE_KEY: {"role": role, "kind": kind, "labelCol": label_col}}


def _entry(metadata: dict[str, Any] | None, name: str) -> str | None:
    value = (metadata or {}).get(SCORE_KEY)
    return value.get(name) if isinstance(value, dict) else None


def role(field: T.StructField) -> str | None:
    return _entry(field.metadata, "role")


def classes(metadata: dict[str, Any] | None) -> list[str] | None:
    """The class names a prediction column's ML attribute metadata lists (a nominal attribute's
    values), if any."""
    attr = (metadata or {}).get("ml_attr")
    if isinstance(attr, dict) and attr.get("type") == "nominal" and "vals" in attr:
        return [str(v) for v in attr["vals"]]
    return None


def java_double(value: float) -> str:
    """`value` as the JVM's ``Double.toString`` writes it (and Spark casts a double to string)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + int(exponent)}"


# ---------------------------------------------------------------------------------------------
# Which columns the statistics stages read (MetricParams)


def _scored_prediction(stage: Any, schema: T.StructType) -> T.StructField | None:
    """The prediction field carrying score metadata that `stage` reads, if any."""
    if stage.isSet(stage.predictionCol):
        name = stage.getPredictionCol()
        return next((f for f in schema.fields if f.name == name), None)
    found = [f for f in schema.fields if role(f) == "prediction"]
    require(
        stage,
        len(found) <= 1,
        row_message("manyPredictions", columns=listed([f.name for f in found])),
    )
    return found[0] if found else None


def _existing(stage: Any, schema: T.StructType, column: str, param: str) -> str:
    require(
        stage,
        stage.isSet(stage.getParam(param))
        or _scored_prediction(stage, schema) is not None
        or column in schema.fieldNames(),
        row_message(
            "noScoreColumn", param=param, column=column, available=", ".join(schema.fieldNames())
        ),
    )
    return column


def label_column(stage: Any, schema: T.StructType) -> str:
    """``labelCol`` if set, else the one the score metadata names, else the default."""
    if stage.isSet(stage.labelCol):
        column = stage.getLabelCol()
    else:
        scored = _scored_prediction(stage, schema)
        named = _entry(scored.metadata, "labelCol") if scored is not None else None
        column = named if named is not None else stage.getLabelCol()
    return _existing(stage, schema, column, "labelCol")


def prediction_column(stage: Any, schema: T.StructType) -> str:
    """``predictionCol`` if set, else the one with score metadata, else the default."""
    scored = _scored_prediction(stage, schema)
    column = scored.name if scored is not None else stage.getPredictionCol()
    return _existing(stage, schema, column, "predictionCol")


def _scored_column(stage: Any, schema: T.StructType, wanted: str) -> str | None:
    """The column of class scores of role `wanted` of the same model as the prediction."""
    scored = _scored_prediction(stage, schema)
    if scored is None:
        return None
    label = _entry(scored.metadata, "labelCol")
    for f in schema.fields:
        if role(f) == wanted and _entry(f.metadata, "labelCol") == label:
            return f.name
    return None


def probability_column(stage: Any, schema: T.StructType) -> str:
    if stage.isSet(stage.probabilityCol):
        return str(stage.getProbabilityCol())
    found = _scored_column(stage, schema, "probability")
    return found if found is not None else str(stage.getProbabilityCol())


def score_column(stage: Any, schema: T.StructType) -> str | None:
    """The vector column scores are read from: probabilities, else raw predictions, else none."""
    raw = _scored_column(stage, schema, "rawPrediction")
    candidates = [probability_column(stage, schema)] + ([raw] if raw else []) + ["rawPrediction"]
    for c in candidates:
        if c in schema.fieldNames() and is_vector(schema[c].dataType):
            return c
    return None


def is_classification(stage: Any, schema: T.StructType) -> bool:
    """Whether the task is classification, after checking the columns fit it."""
    label_name = label_column(stage, schema)
    prediction_name = prediction_column(stage, schema)
    require_column(stage, schema, label_name)
    prediction = require_column(stage, schema, prediction_name)
    metric = stage.getEvaluationMetric()
    if metric in ("classification", "regression"):
        classification = metric == "classification"
    else:
        kind = _entry(prediction.metadata, "kind")
        if kind is not None:
            classification = kind == "classification"
        else:
            classification = (
                score_column(stage, schema) is not None
                or not isinstance(prediction.dataType, (T.DoubleType, T.FloatType))
                or classes(prediction.metadata) is not None
            )
    if not classification:
        for c in (label_name, prediction_name):
            require_column_type(
                stage,
                schema,
                c,
                "numeric for a regression metric",
                lambda t: isinstance(t, T.NumericType),
            )
    return classification


def _numeric(df: DataFrame, names: Sequence[str]) -> bool:
    return all(isinstance(df.schema[c].dataType, T.NumericType) for c in names)


def as_classes(stage: Any, df: DataFrame) -> tuple[Column, Column]:
    """Label and prediction as comparable strings: numbers as doubles, so 1 and 1.0 are one
    class."""
    names = (label_column(stage, df.schema), prediction_column(stage, df.schema))
    numeric = _numeric(df, names)

    def key(c: str) -> Column:
        column = F.col(quoted(c))
        return (column.cast("double") if numeric else column).cast("string")

    return key(names[0]), key(names[1])


def complete(stage: Any, df: DataFrame) -> DataFrame:
    """The rows with both a label and a prediction."""
    return df.na.drop(subset=[label_column(stage, df.schema), prediction_column(stage, df.schema)])


# ---------------------------------------------------------------------------------------------
# The metrics (ComputeModelStatistics)


def confusion(stage: Any, df: DataFrame) -> tuple[list[str], list[list[int]]]:
    """The classes, in metric order, and the confusion counts per (true, predicted) class."""
    data = complete(stage, df)
    label, prediction = as_classes(stage, data)
    counts = data.groupBy(label.alias("l"), prediction.alias("p")).count().collect()
    require(stage, bool(counts), row_message("noScoredRows"))
    names = (label_column(stage, df.schema), prediction_column(stage, df.schema))
    numeric = _numeric(df, names)
    named = classes(df.schema[names[1]].metadata) or []
    declared = [java_double(float(c)) if numeric else c for c in named]
    seen: list[str] = []
    for r in counts:
        for value in (r[0], r[1]):
            if value not in seen and value not in declared:
                seen.append(value)
    levels = declared + (sorted(seen, key=float) if numeric else sorted(seen))
    index = {c: i for i, c in enumerate(levels)}
    matrix = [[0] * len(levels) for _ in levels]
    for r in counts:
        matrix[index[r[0]]][index[r[1]]] += r[2]
    return levels, matrix


def _ratio(a: float, b: float) -> float:
    return 0.0 if b == 0 else a / b


def classification_metrics(stage: Any, df: DataFrame) -> tuple[Any, ...]:
    """The row of ``ComputeModelStatistics.classificationSchema``."""
    levels, matrix = confusion(stage, df)
    k = len(levels)
    total = float(sum(sum(row) for row in matrix))
    precision = [_ratio(matrix[i][i], sum(row[i] for row in matrix)) for i in range(k)]
    recall = [_ratio(matrix[i][i], sum(matrix[i])) for i in range(k)]
    f1 = [_ratio(2 * precision[i] * recall[i], precision[i] + recall[i]) for i in range(k)]
    accuracy = sum(matrix[i][i] for i in range(k)) / total
    auc = None
    if k == 2:
        curve = _roc(stage, df, levels[1])
        auc = None if curve is None else _area(curve)
    return (
        accuracy,
        _sum(precision) / k,
        _sum(recall) / k,
        _sum(f1) / k,
        auc,
        levels,
        precision,
        recall,
        f1,
        matrix,
    )


def _sum(values: Sequence[float]) -> float:
    total = 0.0
    for v in values:
        total += v
    return total


def _roc(stage: Any, df: DataFrame, positive: str) -> list[tuple[float, float]] | None:
    """The ROC of the class `positive` against the others, from the second score of each row
    (Spark's ``BinaryClassificationMetrics`` without binning): a point per distinct score, from
    the highest, between (0, 0) and (1, 1). None without class scores."""
    scores = score_column(stage, df.schema)
    if scores is None:
        return None
    data = complete(stage, df).filter(F.col(quoted(scores)).isNotNull())
    label, _ = as_classes(stage, data)
    counts = (
        data.select(
            vector_to_array(F.col(quoted(scores)))[1].alias("s"),
            F.when(label == F.lit(positive), 1).otherwise(0).alias("y"),
        )
        .groupBy("s")
        .agg(F.sum("y").alias("p"), F.count(F.lit(1)).alias("n"))
        .collect()
    )
    counts.sort(key=lambda r: r[0], reverse=True)
    positives = float(sum(r[1] for r in counts))
    negatives = float(sum(r[2] - r[1] for r in counts))
    curve = [(0.0, 0.0)]
    tp = fp = 0.0
    for r in counts:
        tp += r[1]
        fp += r[2] - r[1]
        curve.append((_ratio(fp, negatives), _ratio(tp, positives)))
    curve.append((1.0, 1.0))
    return curve


def _area(curve: list[tuple[float, float]]) -> float:
    """The area under `curve` by the trapezoid rule (Spark's ``AreaUnderCurve``)."""
    total = 0.0
    for (x0, y0), (x1, y1) in zip(curve, curve[1:], strict=False):
        total += (x1 - x0) * (y1 + y0) / 2.0
    return total


def roc_curve(stage: Any, df: DataFrame) -> list[tuple[float, float]]:
    """The ROC curve points of a two-class scored DataFrame (``rocCurve``); empty for other
    tasks or without class scores."""
    levels, _ = confusion(stage, df)
    if len(levels) != 2:
        return []
    return _roc(stage, df, levels[1]) or []


def _divide(a: float, b: float) -> float:
    """`a / b` in the JVM's double arithmetic (a division by zero is infinite or NaN)."""
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def regression_metrics(stage: Any, df: DataFrame) -> tuple[float, float, float, float]:
    """The row of ``ComputeModelStatistics.regressionSchema`` (Spark's ``RegressionMetrics``:
    ``r2`` against the label's variance)."""
    data = complete(stage, df)
    label = F.col(quoted(label_column(stage, df.schema))).cast("double")
    error = label - F.col(quoted(prediction_column(stage, df.schema))).cast("double")
    row = data.select(
        F.count(F.lit(1)).alias("n"),
        F.sum(error * error).alias("squared"),
        F.sum(F.abs(error)).alias("absolute"),
        F.var_samp(label).alias("variance"),
    ).first()
    assert row is not None
    n = float(row["n"])
    require(stage, n > 0, row_message("noScoredRows"))
    squared = math.sqrt(row["squared"]) ** 2  # the summarizer's squared L2 norm
    variance = row["variance"] if row["variance"] is not None else 0.0
    mse = squared / n
    return (mse, math.sqrt(mse), 1 - _divide(squared, variance * (n - 1)), row["absolute"] / n)


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def class_index(levels: Sequence[str], column: str) -> Column:
    """The index of the value of `column`, as a string, in `levels` (-1 where it is none of
    them): ``array_position`` less one."""
    array = ", ".join(_sql_string(c) for c in levels)
    return F.expr(f"array_position(array({array}), CAST({quoted(column)} AS STRING)) - 1")


def log_loss(probabilities: Column, index: Column) -> Column:
    """Minus the log of the probability of the class `index`, clipped to [eps, 1 - eps] (eps the
    double precision's); null for a null input, NaN for an index out of range."""
    eps = math.ulp(1.0)
    p = vector_to_array(probabilities)
    chosen = F.try_element_at(p, (index + 1).cast("int"))
    return (
        F.when(probabilities.isNull() | index.isNull(), F.lit(None).cast("double"))
        .when((index < 0) | (index >= F.size(p)), F.lit(math.nan))
        .otherwise(-F.log(F.least(F.greatest(chosen, F.lit(eps)), F.lit(1 - eps))))
    )
