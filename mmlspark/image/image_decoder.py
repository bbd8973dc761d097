"""ImageDecoder, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from mmlspark.image._ImageDecoder import _ImageDecoder


class ImageDecoder(_ImageDecoder):
    __doc__ = _ImageDecoder.__doc__
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        from mmlspark.image import _backend

        return _backend.transform_decoder(self, dataset)
