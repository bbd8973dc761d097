"""VectorLIME, on the JVM or the Python backend."""

from __future__ import annotations

import math

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mmlspark._engine.messages import row_message
from mmlspark.explainers import _backend as B
from mmlspark.explainers._VectorLIME import _VectorLIME
from mmlspark.explainers.explainer import Explainer


class VectorLIME(Explainer, _VectorLIME):
    """LIME for the elements of the vector column ``inputCol`` of each row: each element moved by
    a normal draw times its standard deviation in the background rows, the samples scored by the
    model, weighted by an exponential kernel of their distance to the row and fitted by a weighted
    ridge regression. Per target class, a vector of the coefficients (per standard deviation of
    each element); in ``metricsCol`` the weighted r2 of the fit.

    Examples
    --------
    >>> lime = VectorLIME(inputCol="features", model=model,
    ...                   targetCol="prediction")  # doctest: +SKIP
    >>> lime.setBackgroundData(train.select("features").limit(200))  # doctest: +SKIP
    >>> lime.transform(rows)  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_VectorLIME.__doc__ or "")

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        name, background = B.vector_input(self, spec, dataset)
        vectors = [r[0].toArray() for r in background.select(B.col(name)).collect() if r[0]]
        B.require(self, bool(vectors), row_message("emptyBackground"))
        size = len(vectors[0])
        stds = []
        for j in range(size):
            column = [float(v[j]) for v in vectors]
            mean = sum(column) / len(column)
            std = math.sqrt(sum((v - mean) ** 2 for v in column) / len(column))
            stds.append(std if std > 0 else 1.0)
        rep = F.array(*[B.normal(j) for j in range(size)])
        x = vector_to_array(B.col(name))
        scale = F.array(*[F.lit(s) for s in stds])
        moved = array_to_vector(
            F.transform(
                F.sequence(F.lit(1), F.lit(size)),
                lambda i: (
                    F.element_at(x, i) + F.element_at(scale, i) * F.element_at(B.col(B.REP), i)
                ),
            )
        )
        return B.lime(spec, dataset, size, [name], [(B.REP, rep), (name, moved)], [False] * size)
