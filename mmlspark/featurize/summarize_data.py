"""SummarizeData, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import is_numeric, quoted, require
from mmlspark.featurize._SummarizeData import _SummarizeData
from mmlspark.featurize.clean_missing_data_model import missing

FEATURE = "Feature"
COUNT_FIELDS = ("Count", "Unique_Value_Count", "Missing_Value_Count")
BASIC_QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
BASIC_FIELDS = ("Min", "1st_Quartile", "Median", "3rd_Quartile", "Max")
SAMPLE_FIELDS = (
    "Sample_Variance",
    "Sample_Standard_Deviation",
    "Sample_Skewness",
    "Sample_Kurtosis",
)
PERCENTILE_QUANTILES = (0.005, 0.01, 0.05, 0.95, 0.99, 0.995)
PERCENTILE_FIELDS = ("P0_5", "P1", "P5", "P95", "P99", "P99_5")
NAN = float("nan")


class SummarizeData(_SummarizeData):
    __doc__ = _SummarizeData.__doc__
    _python_backend = True

    def _summary_schema(self) -> T.StructType:
        """The output schema the JVM stage's transformSchema gives."""
        spec = self._spec()
        groups = [
            (spec.counts, COUNT_FIELDS),
            (spec.basic, BASIC_FIELDS),
            (spec.sample, SAMPLE_FIELDS),
            (spec.percentiles, PERCENTILE_FIELDS),
        ]
        names = [name for on, fields in groups if on for name in fields]
        return T.StructType(
            [T.StructField(FEATURE, T.StringType(), False)]
            + [T.StructField(name, T.DoubleType(), False) for name in names]
        )

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """One row per input column: the counts and moments in one Spark job, the quantiles by
        ``approxQuantile`` over the numeric columns at once, as the JVM stage computes them."""
        spec = self._spec()
        schema = self._summary_schema()
        require(self, not dataset.isStreaming, row_message("summaryStreaming"))
        fields = dataset.schema.fields
        numeric = [f.name for f in fields if is_numeric(f.dataType)]
        nan = F.lit(NAN)
        aggs: list[Column] = []
        if spec.counts:
            for f in fields:
                c = dataset[quoted(f.name)]
                aggs += [
                    F.count(F.lit(1)).cast("double"),
                    F.coalesce(F.sum(missing(c, f.dataType).cast("int")), F.lit(0)).cast("double"),
                    F.approx_count_distinct(c).cast("double"),
                ]
        n_counts = len(aggs)
        if spec.sample:
            for name in numeric:
                c = dataset[quoted(name)].cast("double")
                moments = [F.var_samp(c), F.stddev_samp(c), F.skewness(c), F.kurtosis(c)]
                aggs += [F.coalesce(m.cast("double"), nan) for m in moments]
        aggregated = dataset.agg(*aggs).head() if aggs else None

        def quantiles(probabilities: tuple[float, ...]) -> dict[str, list[float]]:
            if not numeric:
                return {}
            found = dataset.stat.approxQuantile(numeric, list(probabilities), spec.errorThreshold)
            return {
                name: (list(qs) if qs else [NAN] * len(probabilities))
                for name, qs in zip(numeric, found, strict=True)
            }

        basic = quantiles(BASIC_QUANTILES) if spec.basic else {}
        percentiles = quantiles(PERCENTILE_QUANTILES) if spec.percentiles else {}
        rows = []
        for i, f in enumerate(fields):
            row: list[object] = [f.name]
            if spec.counts:
                assert aggregated is not None
                count, missing_count, distinct = aggregated[3 * i : 3 * i + 3]
                row += [count - missing_count, distinct, missing_count]
            if spec.basic:
                row += basic.get(f.name, [NAN] * len(BASIC_QUANTILES))
            if spec.sample:
                if f.name in numeric:
                    assert aggregated is not None
                    k = n_counts + 4 * numeric.index(f.name)
                    row += list(aggregated[k : k + 4])
                else:
                    row += [NAN] * 4
            if spec.percentiles:
                row += percentiles.get(f.name, [NAN] * len(PERCENTILE_QUANTILES))
            rows.append(tuple(row))
        return dataset.sparkSession.createDataFrame(rows, schema)
