"""TabularSHAP, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mmlspark.explainers import _backend as B
from mmlspark.explainers._TabularSHAP import _TabularSHAP
from mmlspark.explainers.explainer import Explainer


class TabularSHAP(Explainer, _TabularSHAP):
    """Kernel SHAP values of the columns ``inputCols`` of each row, per target class a vector
    ``[base value, phi_1, ..., phi_M]`` (the base value is the model's mean over the background
    rows; the phis sum to the row's value less it), and in ``metricsCol`` the r2 of the fit.
    Every coalition of features is scored when ``numSamples`` covers them all (2^M - 2), which
    gives the exact Shapley values; otherwise ``numSamples`` coalitions are drawn.

    Examples
    --------
    >>> shap = TabularSHAP(inputCols=["age", "hours"], model=model, targetCol="probability",
    ...                    targetClasses=[1], outputCol="shap")  # doctest: +SKIP
    >>> shap.setBackgroundData(train.sample(0.01).limit(50)).transform(rows)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_TabularSHAP.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        cols = B.require_input_cols(self, spec, dataset.schema)
        B.check_common(self, spec, dataset)
        B.require_batch(self, dataset)
        background = B.require_background(self, self.getBackgroundData())
        for c in cols:
            B.require_column(self, background.schema, c)
        bg = [f"{B.PREFIX}bg_{j}" for j in range(len(cols))]
        types = [dataset.schema[c].dataType for c in cols]
        aliased = background.select(
            *[B.col(c).cast(t).alias(b) for c, t, b in zip(cols, types, bg, strict=True)]
        )

        def mix(mask):  # type: ignore[no-untyped-def]
            return [
                (c, F.when(F.element_at(mask, j + 1) == 1.0, B.col(c)).otherwise(B.col(bg[j])))
                for j, c in enumerate(cols)
            ]

        return B.shap(spec, dataset, len(cols), cols, aliased, mix)
