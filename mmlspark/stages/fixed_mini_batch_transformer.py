"""FixedMiniBatchTransformer, on the JVM or the Python backend."""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame

from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import batch_type
from mmlspark.stages import _batching
from mmlspark.stages._FixedMiniBatchTransformer import _FixedMiniBatchTransformer


class FixedMiniBatchTransformer(_FixedMiniBatchTransformer):
    __doc__ = _FixedMiniBatchTransformer.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each partition's rows in batches of ``batchSize``, in an Arrow UDF that keeps the
        partitions and their order (``buffered`` changes nothing here: Spark already feeds the
        UDF from a thread of its own)."""
        from pyspark import cloudpickle

        if not self.isDefined(self.batchSize):
            # The JVM stage fails with Scala's require, hence the different form.
            raise ValueError(f"requirement failed: {self.uid}: param 'batchSize' must be set")
        size = self.getOrDefault(self.batchSize)
        # The UDF carries the batching code with it (pickled by value): the Python workers need
        # pyarrow, not mmlspark.
        cloudpickle.register_pickle_by_value(sys.modules[_batching.__name__])
        fixed_batches = _batching.fixed_batches
        return map_in_arrow(
            dataset, lambda batches: fixed_batches(size, batches), batch_type(dataset.schema)
        )
