"""Names SynapseML users import from this area beyond the JVM stages' generated wrappers: the
stages that hold Python functions (UDFTransformer, Lambda; Python only), a stage that lives in
another area here (SummarizeData, in mmlspark.featurize), and the names that have no stage of
the same behaviour here (importing them works, and using them says what to use instead)."""

from __future__ import annotations

from typing import Any, NoReturn

from mmlspark.featurize.summarize_data import SummarizeData
from mmlspark.stages.lambda_stage import Lambda
from mmlspark.stages.udf_transformer import UDFTransformer

__all__ = ["Lambda", "SummarizeData", "TimeIntervalMiniBatchTransformer", "UDFTransformer"]


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
