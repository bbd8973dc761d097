"""CleanMissingData, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import quoted, require
from mmlspark.core.wrapper import on_python_backend
from mmlspark.featurize._CleanMissingData import _CleanMissingData
from mmlspark.featurize.clean_missing_data_model import (
    CleanMissingDataModel,
    cleaned_schema,
    missing,
)

# The accuracy of the approximate median: Spark's default for percentile_approx, as the JVM's.
MEDIAN_ACCURACY = 10000


class CleanMissingData(_CleanMissingData):
    __doc__ = _CleanMissingData.__doc__
    _python_backend = True

    def _fit(self, dataset: DataFrame) -> CleanMissingDataModel:
        """On the Python backend: the fill values in one Spark job (the mean, or the approximate
        median, of each column's non-missing values, written as text by Spark), or customValue."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        spec = self._spec()
        cleaned_schema(self, spec, dataset.schema)
        names = list(spec.inputCols or ())
        if spec.cleaningMode == "Custom":
            fills = [spec.customValue] * len(names)
        else:
            stats = []
            for name in names:
                column = dataset[quoted(name)]
                present = F.when(~missing(column, dataset.schema[name].dataType), column)
                if spec.cleaningMode == "Mean":
                    stat = F.avg(present)
                else:
                    stat = F.percentile_approx(present, 0.5, MEDIAN_ACCURACY)
                stats.append(stat.cast(T.StringType()))
            row = dataset.select(*stats).head()
            assert row is not None
            for i, name in enumerate(names):
                require(
                    self,
                    row[i] is not None,
                    row_message("noStatistic", column=name, mode=spec.cleaningMode.lower()),
                )
            fills = [row[i] for i in range(len(names))]
        model = on_python_backend(CleanMissingDataModel)
        model._resetUid(self.uid)
        self._copyValues(model)
        return model.setFillValues(fills)  # type: ignore[no-any-return]
