"""PartitionConsolidator, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.stages._PartitionConsolidator import _PartitionConsolidator


def executor_count(dataset: DataFrame) -> int:
    """The executors the session asked for (``spark.executor.instances``), 1 where it names none
    (local mode, dynamic allocation): what the Python backend consolidates to."""
    try:
        value = dataset.sparkSession.conf.get("spark.executor.instances", None)
    except Exception:  # a Connect server that does not show the setting
        value = None
    try:
        return max(1, int(value)) if value else 1
    except ValueError:
        return 1


class PartitionConsolidator(_PartitionConsolidator):
    __doc__ = _PartitionConsolidator.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The rows in as many partitions as the session has executors (``coalesce``: no
        shuffle, every row kept): Python workers of one executor share no memory, so the tasks
        cannot hand each other rows as the JVM stage's do."""
        return dataset.coalesce(executor_count(dataset))
