"""Names SynapseML users import from this area: stages that live in another area here
(SummarizeData, in mmlspark.featurize), and names with no stage of the same behaviour here, which
import and, used, say what to use instead."""

from __future__ import annotations

from typing import Any, NoReturn

from mmlspark.featurize.summarize_data import SummarizeData

__all__ = ["SummarizeData", "TimeIntervalMiniBatchTransformer"]


class TimeIntervalMiniBatchTransformer:
    """SynapseML's batching by time. Use :class:`BufferedMiniBatchTransformer` (its
    ``miniBatchSize`` is SynapseML's ``maxBatchSize``, its ``maxBufferMillis`` SynapseML's
    ``millisToWait``): a batch closes at ``miniBatchSize`` rows or at the first row after
    ``maxBufferMillis``, where SynapseML's also closes one while no row arrives."""

    def __init__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "TimeIntervalMiniBatchTransformer (SynapseML's) is BufferedMiniBatchTransformer here: "
            "BufferedMiniBatchTransformer(miniBatchSize=<maxBatchSize>, "
            "maxBufferMillis=<millisToWait>); a batch closes at miniBatchSize rows or at the "
            "first row after maxBufferMillis"
        )
