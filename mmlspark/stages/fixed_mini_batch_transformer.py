"""FixedMiniBatchTransformer, on the JVM or the Python backend."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame

from mmlspark._engine.batching import fixed_batches
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import batch_type
from mmlspark.stages._FixedMiniBatchTransformer import _FixedMiniBatchTransformer


class FixedMiniBatchTransformer(_FixedMiniBatchTransformer):
    __doc__ = _FixedMiniBatchTransformer.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each partition's rows in batches of ``batchSize``, in an Arrow UDF that keeps the
        partitions and their order (``buffered`` changes nothing here: Spark already feeds the
        UDF from a thread of its own)."""
        if not self.isDefined(self.batchSize):
            # The JVM stage fails with Scala's require, hence the different form.
            raise ValueError(f"requirement failed: {self.uid}: param 'batchSize' must be set")
        size = self.getOrDefault(self.batchSize)
        # The UDF carries the engine's batching code with it (pickled by value, see
        # map_in_arrow): the Python workers need pyarrow, not mmlspark.
        return map_in_arrow(
            dataset, functools.partial(fixed_batches, size), batch_type(dataset.schema)
        )
