"""UnrollBinaryImage, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from mmlspark.image._UnrollBinaryImage import _UnrollBinaryImage


class UnrollBinaryImage(_UnrollBinaryImage):
    __doc__ = _UnrollBinaryImage.__doc__
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        from mmlspark.image import _backend

        return _backend.transform_unroll_binary(self, dataset)
