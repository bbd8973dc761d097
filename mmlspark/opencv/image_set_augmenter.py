"""ImageSetAugmenter, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from mmlspark.opencv._ImageSetAugmenter import _ImageSetAugmenter


class ImageSetAugmenter(_ImageSetAugmenter):
    __doc__ = _ImageSetAugmenter.__doc__
    _python_backend = True

    def _python_transform(self, dataset: Any) -> Any:
        from mmlspark.opencv import _backend

        return _backend.transform_augment(self, dataset)
