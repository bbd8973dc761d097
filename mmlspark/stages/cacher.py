"""Cacher, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mmlspark.stages._Cacher import _Cacher


class Cacher(_Cacher):
    __doc__ = _Cacher.__doc__
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input marked for caching; a stream (which cannot be cached) as it is."""
        if self.getDisable() or dataset.isStreaming:
            return dataset
        return dataset.cache()
