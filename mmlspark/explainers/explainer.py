"""What the four explainers share in Python: the background rows (data of the stage, not a param:
saved as Parquet under ``backgroundData`` with the stage, as the JVM saves it) on either backend,
and the Python backend's transform."""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from mmlspark.core.wrapper import require_java_obj

BACKGROUND_DIR = "backgroundData"


class Explainer:
    """Mixin of the explainers: ``backgroundData``'s setter and getter (it is not a param, so not
    a keyword of the constructor), and the Python backend's save and load of it."""

    _python_backend = True
    # On the Python backend (or until a JVM stage holds it): the background rows.
    _background: DataFrame | None = None

    def setBackgroundData(self, value: DataFrame) -> Any:
        """Sets the background rows: what "absent" means for a feature (SHAP), or the statistics
        samples are drawn from (LIME). Keep it small: every explained row is scored against each
        of them (SHAP). On the JVM backend, a classic session's DataFrame."""
        if not isinstance(value, DataFrame):
            raise TypeError(f"backgroundData must be a DataFrame, got {type(value).__name__}")
        on_python: bool = self._on_python()  # type: ignore[attr-defined]
        if not on_python:
            java_obj = require_java_obj(
                self,
                f"{type(self).__name__}.setBackgroundData",
                "run the stage on a classic session, or on the Python backend",
            )
            java_obj.setBackgroundData(value._jdf)
        self._background = value
        return self

    def getBackgroundData(self) -> DataFrame | None:
        """The background rows, or None when none was set."""
        if self._background is not None or self._on_python():  # type: ignore[attr-defined]
            return self._background
        java_obj = getattr(self, "_java_obj", None)
        if java_obj is None or not hasattr(java_obj, "getBackgroundData"):
            return None
        frame = java_obj.getBackgroundData()
        return None if frame is None else DataFrame(frame, SparkSession.active())

    def setBackend(self, name: str) -> Any:
        """Runs this stage on ``"jvm"``, ``"python"`` or ``"auto"``; the params and the background
        rows set so far are kept."""
        background = self.getBackgroundData()
        result = super().setBackend(name)  # type: ignore[misc]
        if background is not None:
            self._background = None
            self.setBackgroundData(background)
        return result

    def _save_data(self, path: str) -> None:
        if self._background is not None:
            self._background.write.parquet(os.path.join(path, BACKGROUND_DIR))

    def _load_data(self, path: str) -> None:
        folder = os.path.join(path, BACKGROUND_DIR)
        if os.path.isdir(folder):
            self._background = SparkSession.active().read.parquet(folder)
