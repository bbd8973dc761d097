"""VectorSHAP, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mmlspark._engine.messages import row_message
from mmlspark.explainers import _backend as B
from mmlspark.explainers._VectorSHAP import _VectorSHAP
from mmlspark.explainers.explainer import Explainer


class VectorSHAP(Explainer, _VectorSHAP):
    """Kernel SHAP values of the elements of the vector column ``inputCol`` of each row, per
    target class a vector ``[base value, phi_1, ..., phi_M]``, and in ``metricsCol`` the r2 of the
    fit (see :class:`TabularSHAP`).

    Examples
    --------
    >>> shap = VectorSHAP(inputCol="features", model=model,
    ...                   targetCol="prediction")  # doctest: +SKIP
    >>> shap.setBackgroundData(train.select("features").limit(50))  # doctest: +SKIP
    >>> shap.transform(rows)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_VectorSHAP.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        name, background = B.vector_input(self, spec, dataset)
        bg = B.PREFIX + "bg"
        aliased = background.select(vector_to_array(B.col(name)).alias(bg))
        first = aliased.head(1)
        B.require(self, bool(first) and first[0][0] is not None, row_message("emptyBackground"))
        size = len(first[0][0])
        x = vector_to_array(B.col(name))

        def mix(mask):  # type: ignore[no-untyped-def]
            def element(i):  # type: ignore[no-untyped-def]
                return F.when(F.element_at(mask, i) == 1.0, F.element_at(x, i)).otherwise(
                    F.element_at(B.col(bg), i)
                )

            return [
                (name, array_to_vector(F.transform(F.sequence(F.lit(1), F.lit(size)), element)))
            ]

        return B.shap(spec, dataset, size, [name], aliased, mix)
