"""MiniBatchTransformer, on the JVM or the Python backend."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame

from mmlspark._engine.batching import fixed_batches
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import batch_type
from mmlspark.stages._MiniBatchTransformer import _MiniBatchTransformer


class MiniBatchTransformer(_MiniBatchTransformer):
    __doc__ = _MiniBatchTransformer.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each partition's rows in batches of ``miniBatchSize``, in an Arrow UDF that keeps the
        partitions and their order (``mmlspark._engine.batching``)."""
        size = self.getOrDefault(self.miniBatchSize)
        return map_in_arrow(
            dataset, functools.partial(fixed_batches, size), batch_type(dataset.schema)
        )
