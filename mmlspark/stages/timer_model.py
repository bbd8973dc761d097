"""TimerModel, on the JVM or the Python backend, with the time its last transform took."""

from __future__ import annotations

import logging
import time
from typing import Any

from pyspark.ml.base import Transformer
from pyspark.sql import DataFrame

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import require
from mmlspark.core.wrapper import require_java_obj
from mmlspark.stages._TimerModel import _TimerModel

_log = logging.getLogger("mmlspark.stages.Timer")


def class_name(stage: Any) -> str:
    """The class of `stage` as the JVM stage names it: its JVM class where it has one."""
    declared = getattr(type(stage), "_java_class_name", None)
    if isinstance(declared, str):
        return declared
    module = type(stage).__module__
    if module.startswith("pyspark.ml."):
        return "org.apache.spark." + module.removeprefix("pyspark.") + "." + type(stage).__name__
    return f"{module}.{type(stage).__qualname__}"


def inner_stage(stage: Any) -> Any:
    """The stage a Timer or TimerModel wraps (``TimerParams.requireStage``)."""
    require(stage, stage.isDefined(stage.stage), "param 'stage' must be set")
    return stage.getOrDefault(stage.stage)


class TimerModel(_TimerModel):
    __doc__ = _TimerModel.__doc__
    _python_backend = True
    # Made by Timer.fit on the Python backend, whatever the backend setting.
    _made_on_python: bool = False
    # How long the last transform on the Python backend took, in milliseconds.
    _last_millis: int = -1

    @classmethod
    def _fitted_on_python(cls, uid: str) -> TimerModel:
        """The model Timer ``uid`` fits on the Python backend (the JVM's keeps its uid too)."""
        model = cls.__new__(cls)
        model._made_on_python = True
        model.__init__()  # type: ignore[misc]
        model._resetUid(uid)
        return model

    def _chosen_backend(self, setting: str | None) -> str:
        if setting is None and self._made_on_python:
            return "python"
        return super()._chosen_backend(setting)

    def lastTransformMillis(self) -> int:
        """How long the most recent ``transform`` took, in milliseconds (-1 before the first).

        Measured where the wrapped stage is run from: the JVM, or on the Python backend the
        driver's Python process; with ``materialize`` on this includes computing (and caching)
        the output.
        """
        if self._on_python():
            return self._last_millis
        java_obj = require_java_obj(
            self, "TimerModel.lastTransformMillis", "the time is also in the driver's log (INFO)"
        )
        return int(java_obj.lastTransformMillis())

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Runs the wrapped transformer (on whichever backend it runs) and times it; with
        ``materialize``, caches and counts its output (not a stream's) so the time is the
        work's. The time is logged on the ``mmlspark`` logger (INFO), as the JVM logs it."""
        inner = inner_stage(self)
        require(
            self,
            isinstance(inner, Transformer),
            row_message("notTransformer", param="stage", held=class_name(inner)),
        )
        start = time.monotonic_ns()
        out = inner.transform(dataset)
        if self.getOrDefault(self.materialize) and not out.isStreaming:
            out = out.cache()
            out.count()
        self._last_millis = (time.monotonic_ns() - start) // 1_000_000
        _log.info(
            "%s %s: transform by %s took %d ms",
            type(self).__name__,
            self.uid,
            inner.uid,
            self._last_millis,
        )
        return out
