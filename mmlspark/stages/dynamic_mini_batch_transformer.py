"""DynamicMiniBatchTransformer, on the JVM or the Python backend."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame

from mmlspark._engine.batching import MAX_READ_AHEAD, dynamic_batches
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import batch_type
from mmlspark.stages._DynamicMiniBatchTransformer import _DynamicMiniBatchTransformer


class DynamicMiniBatchTransformer(_DynamicMiniBatchTransformer):
    __doc__ = _DynamicMiniBatchTransformer.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each partition's rows in batches of whatever rows are ready, up to ``maxBatchSize``:
        a thread of the Python worker reads the partition's Arrow record batches ahead (up to
        ``maxBatchSize`` rows, at most 65536, and at least one record batch) and each batch is
        the rows read and not yet batched, waiting for the next record batch when there are none
        (``mmlspark._engine.batching``). As on the JVM, where the batches end depends on how fast
        the rows come; flattened, they are the partition's rows in order."""
        most = self.getOrDefault(self.maxBatchSize)
        return map_in_arrow(
            dataset,
            functools.partial(dynamic_batches, most, min(most, MAX_READ_AHEAD)),
            batch_type(dataset.schema),
        )
