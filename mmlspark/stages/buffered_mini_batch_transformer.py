"""BufferedMiniBatchTransformer, on the JVM or the Python backend."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame

from mmlspark._engine.batching import buffered_batches
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import batch_type
from mmlspark.stages._BufferedMiniBatchTransformer import _BufferedMiniBatchTransformer


class BufferedMiniBatchTransformer(_BufferedMiniBatchTransformer):
    __doc__ = _BufferedMiniBatchTransformer.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Each partition's rows in batches of ``miniBatchSize`` rows, a batch closing early at
        the first rows that arrive ``maxBufferMillis`` after its first; the Python workers get
        their rows in Arrow record batches and read the clock as each arrives
        (``mmlspark._engine.batching``)."""
        size = self.getOrDefault(self.miniBatchSize)
        millis = self.getOrDefault(self.maxBufferMillis)
        return map_in_arrow(
            dataset,
            functools.partial(buffered_batches, size, millis),
            batch_type(dataset.schema),
        )
