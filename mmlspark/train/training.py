"""The Python backend of TrainClassifier and TrainRegressor and their models: the JVM's
``Featurization`` and ``Training`` built from pyspark's own ML stages, which run on a classic
session without the jar (in Spark's JVM) and on Spark Connect (on the server) alike.

The featurization is the JVM's, stage for stage and param for param (imputed numbers, indexed and
one-hot encoded categories, hashed free text, assembled arrays and vectors), fitted on the same
rows, so that the learner sees the same features and is fitted alike on either backend.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from py4j.java_gateway import JavaObject
from pyspark.ml import Pipeline, PipelineModel, Transformer
from pyspark.ml.feature import (
    HashingTF,
    Imputer,
    OneHotEncoder,
    RegexTokenizer,
    SQLTransformer,
    StringIndexer,
    VectorAssembler,
    VectorSizeHint,
)
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import (
    fail,
    is_vector,
    quoted,
    require,
    require_column_type,
)

__all__ = [
    "apply_featurization",
    "check_columns",
    "feature_columns",
    "fit_into",
    "jvm_class_name",
    "label_type",
    "labelled",
    "parse_label_type",
    "require_transformer",
]

_log = logging.getLogger("mmlspark")

MAX_ARRAY_LENGTH = 1024
#: How many non-null training values of a string column `is_text` looks at.
TEXT_SAMPLE = 1000
MIN_TEXT_TOKENS = 2.0
MIN_TEXT_DISTINCT_FRACTION = 0.5
EXPECTED = "numeric, boolean, string, array<numeric> or vector"


def jvm_class_name(stage: Any) -> str:
    """The JVM class of a stage: ours by declaration, Spark's by its JVM object or its module."""
    declared = getattr(type(stage), "_java_class_name", None)
    if declared:
        return str(declared)
    java_obj = getattr(stage, "_java_obj", None)
    if isinstance(java_obj, JavaObject):
        return str(java_obj.getClass().getName())
    module = type(stage).__module__
    if module.startswith("pyspark."):
        module = "org.apache.spark." + module.removeprefix("pyspark.")
        module = "org.apache.spark.ml" if module == "org.apache.spark.ml.pipeline" else module
    return f"{module}.{type(stage).__name__}"


def require_transformer(stage: Any, param: str, value: Any) -> Transformer:
    """The stage-valued param `param`'s value as a Transformer (a fitted model)."""
    if not isinstance(value, Transformer):
        fail(
            stage,
            row_message("notTransformer", param=param, held=jvm_class_name(value)),
        )
    return value


def require_learners_run(stage: Any) -> None:
    """The learners of the Python backend are pyspark's own, which a Spark Connect client runs
    on the server from Spark 4.0 on: before that, a clear error naming what to use instead."""
    from pyspark.sql.utils import is_remote

    from mmlspark.core.compat import PYSPARK_LINE, connect_ml_supported
    from mmlspark.core.wrapper import ConnectNotSupportedError

    if is_remote() and not connect_ml_supported():
        line = ".".join(map(str, PYSPARK_LINE))
        raise ConnectNotSupportedError(
            f"{type(stage).__name__} {stage.uid}: its Python backend trains and runs pyspark's own "
            f"ML stages, which the Spark Connect client of Spark {line} cannot run (Spark 4.0 "
            "and newer can); use a classic session (with or without the mmlspark jar)"
        )


def label_type(data_type: T.DataType) -> str:
    """A label type as the JVM records it: its SQL name, lower case."""
    return data_type.simpleString()


_ATOMIC = {
    t.simpleString(): t
    for t in (
        T.StringType(),
        T.BooleanType(),
        T.ByteType(),
        T.ShortType(),
        T.IntegerType(),
        T.LongType(),
        T.FloatType(),
        T.DoubleType(),
    )
}


def parse_label_type(name: str) -> T.DataType:
    """The type a recorded label type names (``DataType.fromDDL`` of the types a label has)."""
    found = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", name.strip().lower())
    if found:
        return T.DecimalType(int(found.group(1)), int(found.group(2)))
    if name.strip().lower() in _ATOMIC:
        return _ATOMIC[name.strip().lower()]
    raise ValueError(f"unknown label type '{name}'")


# ---------------------------------------------------------------------------------------------
# Featurization


def supported(data_type: T.DataType) -> bool:
    if isinstance(data_type, (T.NumericType, T.BooleanType, T.StringType)):
        return True
    if isinstance(data_type, T.ArrayType):
        return isinstance(data_type.elementType, (T.NumericType, T.BooleanType))
    return is_vector(data_type)


def check_columns(stage: Any, schema: T.StructType, columns: Sequence[str]) -> None:
    """Fails (before any job) for an input column of a type that cannot be featurized."""
    require(stage, len(columns) > 0, row_message("noFeatures"))
    for c in columns:
        require_column_type(stage, schema, c, EXPECTED, supported)


def is_text(values: Sequence[str]) -> bool:
    """Whether the sampled non-null values of a string column look like free text: many-word
    values that rarely repeat."""
    if not values:
        return False
    tokens = sum(len(re.findall(r"\w+", v, re.ASCII)) for v in values) / len(values)
    distinct = len(set(values)) / len(values)
    return tokens >= MIN_TEXT_TOKENS and distinct >= MIN_TEXT_DISTINCT_FRACTION


def listed(names: Sequence[str]) -> str:
    return "'" + "', '".join(names) + "'"


def _first_value(data: DataFrame, column: str) -> Any:
    rows = data.select(F.col(quoted(column))).na.drop().head(1)
    return rows[0][0] if rows else None


def _string_choice(
    stage: Any,
    data: DataFrame,
    string_cols: list[str],
    text_cols: list[str] | None,
    categorical_cols: list[str] | None,
) -> list[str]:
    """The string columns featurized as free text: named, or judged by a sample."""
    named = (text_cols or []) + (categorical_cols or [])
    for c in named:
        require(
            stage,
            c in string_cols,
            row_message("notStringColumn", column=c, strings=listed(string_cols)),
        )
    both = [c for c in (text_cols or []) if c in (categorical_cols or [])]
    require(stage, not both, row_message("textAndCategorical", columns=listed(both)))
    text = []
    for c in string_cols:
        if text_cols is not None and c in text_cols:
            text.append(c)
        elif categorical_cols is None or c not in categorical_cols:
            sample = data.select(F.col(quoted(c))).na.drop().limit(TEXT_SAMPLE).collect()
            if is_text([r[0] for r in sample]):
                text.append(c)
    return text


def fit_featurization(
    stage: Any, data: DataFrame, columns: Sequence[str], output: str, prefix: str
) -> tuple[PipelineModel, list[str], list[str]]:
    """Fits the featurization of `columns` of `data` into the vector column `output` (every
    helper column it adds starts with `prefix`): the fitted pipeline, the text columns and the
    categorical ones."""
    schema = data.schema
    check_columns(stage, schema, columns)
    string_cols = [c for c in columns if isinstance(schema[c].dataType, T.StringType)]
    spec = stage._spec()
    text_cols = None if spec.textCols is None else list(spec.textCols)
    categorical = None if spec.categoricalCols is None else list(spec.categoricalCols)
    text = _string_choice(stage, data, string_cols, text_cols, categorical)
    categories = [c for c in string_cols if c not in text]
    num_features = spec.numFeatures
    _log.info(
        "%s %s: string columns hashed as free text into %d buckets: [%s]; one-hot encoded as "
        "categories: [%s] (override with textCols / categoricalCols)",
        type(stage).__name__,
        stage.uid,
        num_features,
        ", ".join(text),
        ", ".join(categories),
    )
    numeric: list[tuple[str, str]] = []  # (SQL expression, column)
    strings: list[str] = []
    texts: list[str] = []
    vectors: list[tuple[str, int]] = []

    def helper(kind: str) -> str:
        return f"{prefix}{kind}_{len(numeric) + len(strings) + len(vectors)}"

    for c in columns:
        q, data_type = quoted(c), schema[c].dataType
        if isinstance(data_type, T.StringType):
            (texts if c in text else strings).append(c)
        elif is_vector(data_type):
            first = _first_value(data, c)
            require(stage, first is not None, row_message("unsizedVector", column=c))
            vectors.append((c, first.size))
        elif isinstance(data_type, T.ArrayType):
            first = _first_value(data, c)
            size = len(first) if first is not None else 0
            require(
                stage,
                0 < size <= MAX_ARRAY_LENGTH,
                row_message("arrayLength", column=c, max=MAX_ARRAY_LENGTH, size=size),
            )
            for k in range(size):
                numeric.append((f"CAST({q}[{k}] AS DOUBLE)", helper("a")))
        else:
            numeric.append((f"CAST({q} AS DOUBLE)", helper("n")))
    imputed = [f"{n}_imputed" for _, n in numeric]
    indexed = [f"{prefix}{s}_index" for s in strings]
    encoded = [f"{prefix}{s}_onehot" for s in strings]
    stages: list[Any] = []
    hashed = []
    for k, c in enumerate(texts):
        filled, tokens, counts = (f"{prefix}t_{k}_{part}" for part in ("text", "tokens", "tf"))
        stages.append(
            SQLTransformer(
                statement=f"SELECT *, COALESCE({quoted(c)}, '') AS {quoted(filled)} FROM __THIS__"
            )
        )
        stages.append(
            RegexTokenizer(
                inputCol=filled, outputCol=tokens, pattern="\\W+", gaps=True, toLowercase=True
            )
        )
        stages.append(HashingTF(inputCol=tokens, outputCol=counts, numFeatures=num_features))
        hashed.append(counts)
    if numeric:
        selected = ", ".join(f"{e} AS {quoted(n)}" for e, n in numeric)
        stages.append(SQLTransformer(statement=f"SELECT *, {selected} FROM __THIS__"))
        stages.append(
            Imputer(inputCols=[n for _, n in numeric], outputCols=imputed, strategy="mean")
        )
    if strings:
        stages.append(StringIndexer(inputCols=strings, outputCols=indexed, handleInvalid="keep"))
        stages.append(OneHotEncoder(inputCols=indexed, outputCols=encoded, handleInvalid="keep"))
    for c, size in vectors:
        stages.append(VectorSizeHint(inputCol=c, size=size, handleInvalid="optimistic"))
    stages.append(
        VectorAssembler(
            inputCols=imputed + encoded + hashed + [c for c, _ in vectors],
            outputCol=output,
            handleInvalid="keep",
        )
    )
    return Pipeline(stages=stages).fit(data), text, categories


def apply_featurization(featurization: Any, data: DataFrame, prefix: str, output: str) -> DataFrame:
    """`data` featurized into `output`, without the other helper columns."""
    out = featurization.transform(data)
    return out.drop(*[c for c in out.columns if c.startswith(prefix) and c != output])


# ---------------------------------------------------------------------------------------------
# Training (TrainParams, Training)


def helper_prefix(stage: Any) -> str:
    """Helper columns start with this; they never reach the output."""
    return f"__train_{stage.uid}_"


def features_column(stage: Any) -> str:
    """`featuresCol` when set (then kept in the output), else a helper column."""
    given = stage._spec().featuresCol
    return str(given) if given is not None else helper_prefix(stage) + "features"


def feature_columns(stage: Any, schema: T.StructType) -> list[str]:
    """`inputCols`, or every column but the label."""
    spec = stage._spec()
    if spec.inputCols is not None:
        return list(spec.inputCols)
    label = spec.labelCol
    return [c for c in schema.fieldNames() if c != label]


def labelled(stage: Any, dataset: DataFrame, label_col: str) -> DataFrame:
    """The rows of `dataset` that have a label; the others are dropped, their count logged."""
    label = F.col(quoted(label_col))
    unlabelled = dataset.filter(label.isNull()).count()
    if unlabelled > 0:
        _log.warning(
            "%s %s: dropped %d rows whose label '%s' is null",
            type(stage).__name__,
            stage.uid,
            unlabelled,
            label_col,
        )
    return dataset.filter(label.isNotNull())


def configure(owner: Any, learner: Any, features: str, label: str, prediction: str) -> Any:
    """A copy of the learner reading `features` and `label`, writing its prediction to
    `prediction`."""
    copied = learner.copy()
    for name, value in (
        ("featuresCol", features),
        ("labelCol", label),
        ("predictionCol", prediction),
    ):
        require(
            owner,
            copied.hasParam(name),
            row_message("noLearnerParam", learner=jvm_class_name(learner), name=name),
        )
        copied._set(**{name: value})
    return copied


def fit_into(
    stage: Any,
    dataset: DataFrame,
    data: DataFrame,
    label: Column,
    type_name: str,
    trained: Any,
) -> Any:
    """Fits the featurization and the learner on `data` (the labelled rows of `dataset`), the
    learner's label being `label` as a double, and gives `trained` (a new model of the stage's
    uid) the stage's values and all it needs to score."""
    require_learners_run(stage)
    prefix = helper_prefix(stage)
    columns = feature_columns(stage, dataset.schema)
    features = features_column(stage)
    label_column = prefix + "label"
    featurization, text, categories = fit_featurization(stage, data, columns, features, prefix)
    prepared = apply_featurization(featurization, data, prefix, features).withColumn(
        label_column, label.cast("double")
    )
    learner = configure(stage, stage._spec().model, features, label_column, prefix + "prediction")
    fitted = learner.fit(prepared)
    stage._copyValues(trained)
    return trained._set(
        inputCols=columns,
        labelType=type_name,
        featurization=featurization,
        textCols=text,
        categoricalCols=categories,
        model=fitted,
    )


def score(model: Any, dataset: DataFrame) -> DataFrame:
    """Checks that the input columns are there, then featurizes and runs the learner."""
    require_learners_run(model)
    spec = model._spec()
    check_columns(model, dataset.schema, list(spec.inputCols or ()))
    inner = require_transformer(model, "model", spec.model)
    featured = apply_featurization(
        spec.featurization,
        dataset,
        helper_prefix(model),
        features_column(model),
    )
    return inner.transform(featured)


def label_sort_key(data_type: T.DataType) -> Any:
    """How the distinct training labels (value, value as string) are ordered: numbers
    numerically, others as text (``TrainClassifier.before``)."""
    if isinstance(data_type, T.NumericType):
        return lambda r: float(r[0])
    if isinstance(data_type, T.BooleanType):
        return lambda r: bool(r[0])
    return lambda r: r[1]
