"""StratifiedRepartition, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import quoted, require, require_column_type
from mmlspark.stages._StratifiedRepartition import _StratifiedRepartition

# What a label column holds, as errors name it (StratifiedRepartition.Labels).
LABELS = "a string, boolean or numeric type"


def _is_label(data_type: T.DataType) -> bool:
    return isinstance(data_type, (T.StringType, T.BooleanType, T.NumericType))


def _unused(schema: T.StructType, names: list[str]) -> list[str]:
    out = []
    for name in names:
        i = 0
        while f"__{name}_{i}" in schema.fieldNames():
            i += 1
        out.append(f"__{name}_{i}")
    return out


class StratifiedRepartition(_StratifiedRepartition):
    __doc__ = _StratifiedRepartition.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The rows dealt to the partitions label by label, as the JVM stage deals them (the
        same Spark operations, so the same rows in the same partitions)."""
        spec = self._spec()
        require_column_type(self, dataset.schema, spec.labelCol, LABELS, _is_label)
        require(self, not dataset.isStreaming, row_message("labelsStreaming"))
        label = F.col(quoted(spec.labelCol))
        stats = (
            dataset.select(label.alias("label"), F.spark_partition_id().alias("partition"))
            .groupBy("label")
            .agg(F.count(F.lit(1)), F.max("partition"))
            .collect()
        )
        if not stats:
            return dataset
        partitions = max(row[2] for row in stats) + 1
        equal = max(max(row[1] for row in stats), partitions)
        order, rank, size, repeat, slot = _unused(
            dataset.schema, ["order", "rank", "size", "repeat", "slot"]
        )
        by_label = Window.partitionBy(label)
        n = F.col(size)
        if spec.mode == "original":
            target = n
        elif spec.mode == "equal":
            target = F.lit(equal)
        else:
            target = F.greatest(
                F.lit(partitions).cast("long"), F.ceil((n + F.lit(equal)) / 2).cast("long")
            )
        # The k-th row of a label (from 0, in the random order) is repeated as slots k, k + n,
        # k + 2n, ... below the label's target; slot s goes to partition s mod partitions.
        dealt = (
            dataset.withColumn(order, F.rand(spec.seed))
            .withColumn(rank, F.row_number().over(by_label.orderBy(F.col(order))).cast("long") - 1)
            .withColumn(size, F.count(F.lit(1)).over(by_label))
            .withColumn(
                repeat,
                F.explode(F.sequence(F.lit(0).cast("long"), F.ceil(target / n).cast("long") - 1)),
            )
            .withColumn(slot, F.col(repeat) * n + F.col(rank))
            .where(F.col(slot) < target)
        )
        partition = F.pmod(F.col(slot), F.lit(partitions).cast("long"))
        return dealt.repartitionByRange(partitions, partition).drop(order, rank, size, repeat, slot)
