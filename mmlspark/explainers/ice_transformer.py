"""ICETransformer, on the JVM or the Python backend."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.explainers import _backend as B
from mmlspark.explainers._ICETransformer import _ICETransformer

INDEX, VALUE = B.PREFIX + "index", B.PREFIX + "value"
TARGET, FIRST = B.PREFIX + "target", B.PREFIX + "first"
CATEGORICAL_KEYS = ("name", "numTopValues", "outputColName")
NUMERIC_KEYS = ("name", "numSplits", "rangeMin", "rangeMax", "outputColName")
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class Feature:
    """A feature and its settings (the JVM's ICECategoricalFeature or ICENumericFeature)."""

    name: str
    categorical: bool
    output_col_name: str | None = None
    num_top_values: int | None = None
    num_splits: int | None = None
    range_min: float | None = None
    range_max: float | None = None

    @property
    def output_col(self) -> str:
        return self.output_col_name or self.name + "_dependence"


def feature_setting(value: Any) -> str:
    """A feature's setting as the param holds it: a name as is, a dict (SynapseML's form, e.g.
    ``{"name": "age", "numSplits": 5}``) as JSON."""
    if isinstance(value, dict):
        return json.dumps(value)
    if not isinstance(value, str):
        raise TypeError(f"a feature is a column name or a dict of settings, got {value!r}")
    return value


def parse(setting: str, categorical: bool) -> Feature | str:
    """The feature `setting` describes, or why it describes none (a string)."""
    keys = CATEGORICAL_KEYS if categorical else NUMERIC_KEYS
    if not setting.strip().startswith("{"):
        return Feature(setting, categorical) if setting.strip() else "the name is empty"
    try:
        values = json.loads(setting)
    except ValueError:
        values = None
    if not isinstance(values, dict):
        return "it is not a JSON object"
    unknown = [k for k in values if k not in keys]
    if unknown:
        return f"unknown key(s) {', '.join(unknown)}"
    found: dict[str, Any] = {}
    for key, value in values.items():
        if key in ("name", "outputColName"):
            if not isinstance(value, str) or not value:
                return f'"{key}" must be a non-empty string'
        elif key in ("numTopValues", "numSplits"):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
                return f'"{key}" must be an integer of at least 1'
        elif (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            return f'"{key}" must be a number'
        else:
            value = float(value)
        found[key] = value
    if "name" not in found:
        return '"name" is missing'
    return Feature(
        found["name"],
        categorical,
        found.get("outputColName"),
        found.get("numTopValues"),
        found.get("numSplits"),
        found.get("rangeMin"),
        found.get("rangeMax"),
    )


def numeric_grid(low: float, high: float, splits: int, data_type: T.DataType) -> list[Any]:
    """A numeric feature's grid (the JVM's ICETransformer.numericGrid)."""
    if isinstance(data_type, INTEGRAL):
        lo, hi = math.ceil(low), math.floor(high)
        if hi - lo <= splits:
            return list(range(lo, hi + 1))
        points = (math.floor(low + (high - low) * i / splits + 0.5) for i in range(splits + 1))
        return list(dict.fromkeys(points))
    return [low + (high - low) * i / splits for i in range(splits + 1)]


class ICETransformer(_ICETransformer):
    """Individual conditional expectation (ICE) and partial dependence of a model on features:
    each row is scored with each feature set in turn to each value of its grid, the other
    features kept. A categorical feature's grid is its ``numTopValues`` most frequent values; a
    numeric one's ``numSplits + 1`` evenly spaced values from its minimum to its maximum (or
    ``rangeMin`` to ``rangeMax``; each integer of the range of an integer column with fewer,
    others rounded). ``kind="individual"`` adds to each row, per feature, a column
    ``<name>_dependence`` (or ``outputColName``) mapping each grid value to the vector of the
    target classes' values; ``"average"`` gives one row of their means over the rows (partial
    dependence); ``"feature"`` one row per feature: its name in ``featureNameCol`` and its
    importance in ``dependenceNameCol``, most important first.

    ``categoricalFeatures`` and ``numericFeatures`` take column names or, as SynapseML's lists of
    ``ICECategoricalFeature`` / ``ICENumericFeature``, dicts of their settings
    (``{"name": "age", "numSplits": 5, "rangeMin": 18.0, "rangeMax": 90.0}``), held as JSON.

    Examples
    --------
    >>> ice = ICETransformer(model=model, targetClasses=[1], kind="average",
    ...                      numericFeatures=[{"name": "age", "numSplits": 5}],
    ...                      categoricalFeatures=["workclass"])  # doctest: +SKIP
    >>> ice.transform(rows).first()["age_dependence"]  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_ICETransformer.__doc__ or "")
    _python_backend = True

    def _set(self, **kwargs: Any) -> Any:
        for key in ("categoricalFeatures", "numericFeatures"):
            if kwargs.get(key) is not None:
                kwargs[key] = [feature_setting(v) for v in kwargs[key]]
        return super()._set(**kwargs)

    def _features(self, spec: Any, schema: T.StructType) -> list[Feature]:
        features = []
        for settings, categorical in (
            (spec.categoricalFeatures or (), True),
            (spec.numericFeatures or (), False),
        ):
            keys = CATEGORICAL_KEYS if categorical else NUMERIC_KEYS
            for setting in settings:
                parsed = parse(setting, categorical)
                if isinstance(parsed, str):
                    B.fail(
                        self,
                        row_message(
                            "iceBadFeature", setting=setting, keys=", ".join(keys), reason=parsed
                        ),
                    )
                features.append(parsed)
        B.require(self, bool(features), row_message("iceNoFeatures"))
        B.require_distinct(self, "the features", [f.name for f in features])
        for f in features:
            if f.categorical:
                B.require_column_type(
                    self,
                    schema,
                    f.name,
                    row_message("iceCategoricalType"),
                    lambda t: isinstance(t, (T.StringType, T.BooleanType, *INTEGRAL)),
                )
            else:
                B.require_column_type(
                    self, schema, f.name, row_message("iceNumericType"), B.is_numeric
                )
                if f.range_min is not None and f.range_max is not None:
                    B.require(
                        self,
                        f.range_min <= f.range_max,
                        row_message("iceRange", column=f.name, min=f.range_min, max=f.range_max),
                    )
        return features

    def _check(self, spec: Any, data: DataFrame) -> list[Feature]:
        """The JVM's transformSchema checks, before any job."""
        schema = data.schema
        features = self._features(spec, schema)
        model = B.model_of(self, spec)
        B.require(
            self,
            all(c >= 0 for c in spec.targetClasses or ()),
            row_message("negativeClasses", classes=", ".join(map(str, spec.targetClasses or ()))),
        )
        if spec.targetClassesCol is not None:
            B.require_column_type(
                self,
                schema,
                spec.targetClassesCol,
                row_message("classesType"),
                lambda t: isinstance(t, T.ArrayType) and isinstance(t.elementType, T.IntegerType),
            )
        scored = model.transform(data.limit(0)).schema
        B.require_column_type(self, scored, spec.targetCol, row_message("targetType"), B.is_target)
        outputs = [f.output_col for f in features]
        if spec.kind == "individual":
            for c in outputs:
                B.require_absent(self, schema, c)
        if spec.kind == "feature":
            B.require_distinct(
                self,
                "featureNameCol and dependenceNameCol",
                [spec.featureNameCol, spec.dependenceNameCol],
            )
        else:
            B.require_distinct(self, "the features' outputColName", outputs)
        B.require_batch(self, data)
        return features

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        features = self._check(spec, dataset)
        rows = B.indexed(spec, dataset)
        if spec.numSamples is not None:
            rows = rows.orderBy(F.rand(B.SEED)).limit(spec.numSamples)
        scored = [(f, _dependence(spec, rows, f, _grid(spec, dataset, f))) for f in features]
        if spec.kind == "individual":
            out = rows
            for f, s in scored:
                out = out.join(_individual(s, f), on=B.ID, how="left")
            return out.drop(B.ID, B.CLASSES)
        if spec.kind == "average":
            return functools.reduce(DataFrame.crossJoin, [_average(s, f) for f, s in scored])
        return (
            functools.reduce(DataFrame.unionByName, [_importance(spec, s, f) for f, s in scored])
            .orderBy(F.col(FIRST).desc())
            .drop(FIRST)
        )


def _grid(spec: Any, data: DataFrame, f: Feature) -> list[Column]:
    c = B.col(f.name)
    data_type = data.schema[f.name].dataType
    values: Sequence[Any]
    if f.categorical:
        values = [
            r[0]
            for r in data.filter(c.isNotNull())
            .groupBy(c.alias("v"))
            .count()
            .orderBy(F.col("count").desc(), F.col("v"))
            .limit(f.num_top_values or spec.numTopValues)
            .collect()
        ]
    else:
        extremes = data.agg(F.min(c).cast("double"), F.max(c).cast("double")).collect()[0]
        low = f.range_min if f.range_min is not None else extremes[0]
        high = f.range_max if f.range_max is not None else extremes[1]
        splits = f.num_splits or spec.numSplits
        values = [] if low is None or high is None else numeric_grid(low, high, splits, data_type)
    return [F.lit(v).cast(data_type) for v in values]


def _dependence(spec: Any, rows: DataFrame, f: Feature, values: list[Column]) -> DataFrame:
    expanded = (
        rows.withColumn(INDEX, F.explode(F.array(*[F.lit(i) for i in range(len(values))])))
        .withColumn(f.name, F.element_at(F.array(*values), F.col(INDEX) + 1))
        .withColumn(VALUE, B.col(f.name))
    )
    scored = spec.model.transform(expanded)
    return scored.select(
        B.col(B.ID), F.col(INDEX), F.col(VALUE), B.targets(spec, scored).alias(TARGET)
    )


def _by(field: str):  # type: ignore[no-untyped-def]
    def compare(left: Column, right: Column) -> Column:
        return (
            F.when(left[field] < right[field], -1).when(left[field] > right[field], 1).otherwise(0)
        )

    return compare


def _individual(scored: DataFrame, f: Feature) -> DataFrame:
    entries = F.struct(F.col(INDEX), F.col(VALUE), array_to_vector(F.col(TARGET)).alias(TARGET))
    return (
        scored.groupBy(B.col(B.ID))
        .agg(F.array_sort(F.collect_list(entries), _by(INDEX)).alias("s"))
        .select(
            B.col(B.ID),
            F.map_from_arrays(F.col("s").getField(VALUE), F.col("s").getField(TARGET)).alias(
                f.output_col
            ),
        )
    )


def _means(scored: DataFrame) -> DataFrame:
    return (
        scored.select(F.col(INDEX), F.col(VALUE), F.posexplode(F.col(TARGET)).alias("k", "y"))
        .groupBy(F.col(INDEX), F.col(VALUE), F.col("k"))
        .agg(F.avg("y").alias("y"))
        .groupBy(F.col(INDEX), F.col(VALUE))
        .agg(F.array_sort(F.collect_list(F.struct("k", "y")), _by("k")).alias("ys"))
        .select(
            F.col(INDEX), F.col(VALUE), array_to_vector(F.col("ys").getField("y")).alias(TARGET)
        )
    )


def _average(scored: DataFrame, f: Feature) -> DataFrame:
    entries = F.struct(F.col(INDEX), F.col(VALUE), F.col(TARGET))
    return (
        _means(scored)
        .agg(F.array_sort(F.collect_list(entries), _by(INDEX)).alias("s"))
        .select(
            F.map_from_arrays(F.col("s").getField(VALUE), F.col("s").getField(TARGET)).alias(
                f.output_col
            )
        )
    )


def _importance(spec: Any, scored: DataFrame, f: Feature) -> DataFrame:
    pdp = _means(scored).select(F.posexplode(vector_to_array(F.col(TARGET))).alias("k", "y"))
    y = F.col("y")
    value = (
        (F.max(y) - F.min(y)) / 4.0 if f.categorical else F.coalesce(F.stddev_samp(y), F.lit(0.0))
    )
    return (
        pdp.groupBy("k")
        .agg(value.alias("v"))
        .agg(F.array_sort(F.collect_list(F.struct("k", "v")), _by("k")).alias("s"))
        .select(
            F.lit(f.name).alias(spec.featureNameCol),
            array_to_vector(F.col("s").getField("v")).alias(spec.dependenceNameCol),
            F.element_at(F.col("s").getField("v"), 1).alias(FIRST),
        )
    )


__all__ = ["ICETransformer"]
