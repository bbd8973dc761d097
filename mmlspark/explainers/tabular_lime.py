"""TabularLIME, on the JVM or the Python backend."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.explainers import _backend as B
from mmlspark.explainers._TabularLIME import _TabularLIME
from mmlspark.explainers.explainer import Explainer


class TabularLIME(Explainer, _TabularLIME):
    """LIME for the columns ``inputCols`` of each row: samples around the row (a numeric column
    moved by a normal draw times its standard deviation in the background rows; a categorical one
    drawn from the background's frequencies), scored by the model, weighted by the kernel
    ``sqrt(exp(-d^2 / kernelWidth^2))`` of their standardized distance to the row and fitted by a
    weighted ridge regression. Per target class, a vector of the coefficients: per standard
    deviation of a numeric column, for "the row's own category" of a categorical one; in
    ``metricsCol`` the weighted r2 of the fit.

    Examples
    --------
    >>> lime = TabularLIME(inputCols=["age", "hours"], model=model, targetCol="probability",
    ...                    targetClasses=[1], numSamples=500)  # doctest: +SKIP
    >>> lime.setBackgroundData(train.limit(200)).transform(rows)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_TabularLIME.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        schema = dataset.schema
        cols = B.require_input_cols(self, spec, schema)
        categorical = [c in (spec.categoricalFeatures or ()) for c in cols]
        for c in spec.categoricalFeatures or ():
            B.require(self, c in cols, row_message("notAnInput", column=c))
        for c, is_cat in zip(cols, categorical, strict=True):
            if not is_cat:
                B.require_column_type(
                    self, schema, c, "numeric (or listed in categoricalFeatures)", B.is_numeric
                )
        B.check_common(self, spec, dataset)
        B.require_batch(self, dataset)
        background = B.require_background(self, self.getBackgroundData())
        for c in cols:
            B.require_column(self, background.schema, c)
        rows = background.select(*[B.col(c).cast(schema[c].dataType) for c in cols]).collect()
        B.require(self, bool(rows), row_message("emptyBackground"))
        p = B.PREFIX
        originals = [(f"{p}x_{j}", B.col(c)) for j, c in enumerate(cols)]
        draws = [
            (f"{p}draw_{j}", B.uniform(j) if is_cat else B.normal(j))
            for j, is_cat in enumerate(categorical)
        ]
        values = [
            (c, _sampled(rows, j, schema[c].dataType, is_cat))
            for j, (c, is_cat) in enumerate(zip(cols, categorical, strict=True))
        ]
        rep = F.array(
            *[
                F.when(B.col(c) == B.col(f"{p}x_{j}"), 1.0).otherwise(0.0)
                if is_cat
                else B.col(f"{p}draw_{j}")
                for j, (c, is_cat) in enumerate(zip(cols, categorical, strict=True))
            ]
        )
        sampled = [*originals, *draws, *values, (B.REP, rep)]
        return B.lime(spec, dataset, len(cols), cols, sampled, categorical)


def _sampled(rows: list[Any], j: int, kind: T.DataType, categorical: bool) -> Column:
    """Feature `j`'s value in a sample, as the JVM's TabularLIME draws it."""
    draw, x = B.col(f"{B.PREFIX}draw_{j}"), B.col(f"{B.PREFIX}x_{j}")
    present = [r[j] for r in rows if r[j] is not None]
    if categorical:
        counts = sorted(Counter(present).items(), key=lambda item: _java_string(item[0]))
        total = float(sum(n for _, n in counts))
        column = F.when(B.col(B.SAMPLE) == 0, x)
        upto = 0
        for value, n in counts[:-1]:
            upto += n
            column = column.when(draw < upto / total, F.lit(value))
        return column.otherwise(F.lit(counts[-1][0])).cast(kind)
    numbers = [float(v) for v in present]
    mean = sum(numbers) / len(numbers)
    std = math.sqrt(sum((v - mean) ** 2 for v in numbers) / len(numbers))
    moved = x.cast("double") + draw * (std if std > 0 else 1.0)
    return moved.cast("float") if isinstance(kind, T.FloatType) else moved


def _java_string(value: Any) -> str:
    """`value` as the JVM's toString writes it (the order categories are listed in)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
