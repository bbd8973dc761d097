"""Timer, on the JVM or the Python backend."""

from __future__ import annotations

import time

from pyspark.ml.base import Estimator, Transformer
from pyspark.sql import DataFrame

from mmlspark.core.checks import fail
from mmlspark.stages._Timer import _Timer
from mmlspark.stages.timer_model import TimerModel, _log, class_name, inner_stage


class Timer(_Timer):
    __doc__ = _Timer.__doc__
    _python_backend = True

    def _fit(self, dataset: DataFrame) -> TimerModel:
        """On the Python backend: fits the wrapped stage where it runs (a Transformer is taken
        as it is), timing it, and logs the time on the ``mmlspark`` logger (INFO). The wrapped
        stage may be any pyspark stage that runs in the session, the jar-less ones included."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        inner = inner_stage(self)
        start = time.monotonic_ns()
        if isinstance(inner, Estimator):
            fitted = inner.fit(dataset)
        elif isinstance(inner, Transformer):
            fitted = inner
        else:
            fail(
                self,
                "param 'stage' must be a Transformer or an Estimator but was " + class_name(inner),
            )
        millis = (time.monotonic_ns() - start) // 1_000_000
        _log.info("%s %s: fitting %s took %d ms", type(self).__name__, self.uid, inner.uid, millis)
        model = TimerModel._fitted_on_python(self.uid)
        self._copyValues(model)
        return model._set(stage=fitted, fitMillis=millis)  # type: ignore[no-any-return]
