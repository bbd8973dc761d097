"""ClassBalancer, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mmlspark.core.checks import quoted, require
from mmlspark.stages._ClassBalancer import _ClassBalancer
from mmlspark.stages.class_balancer_model import ClassBalancerModel, weighted_schema


class ClassBalancer(_ClassBalancer):
    __doc__ = _ClassBalancer.__doc__
    _python_backend = True

    def _fit(self, dataset: DataFrame) -> ClassBalancerModel:
        """On the Python backend: counts the rows of each class (one Spark job) and weighs class
        ``c`` ``n / (k * count(c))``, in the JVM stage's double arithmetic."""
        if not self._on_python():
            return super()._fit(dataset)
        schema = dataset.schema
        weighted_schema(self, schema)
        label = self.getInputCol()
        counts = (
            dataset.groupBy(dataset[quoted(label)].alias("label"))
            .agg(F.count(F.lit(1)).alias("count"))
            .collect()
        )
        require(self, bool(counts), "cannot fit on an empty dataset")
        n, k = float(sum(row[1] for row in counts)), float(len(counts))
        model = ClassBalancerModel._fitted_on_python(
            self.uid,
            schema[label].dataType,
            [row[0] for row in counts],
            [n / (k * row[1]) for row in counts],
        )
        return self._copyValues(model)
