"""TimerModel with access to the time its last transform took."""

from __future__ import annotations

from mmlspark.core.wrapper import require_java_obj
from mmlspark.stages._TimerModel import _TimerModel


class TimerModel(_TimerModel):
    __doc__ = _TimerModel.__doc__

    def lastTransformMillis(self) -> int:
        """How long the most recent ``transform`` took, in milliseconds (-1 before the first).

        Measured on the JVM, where the wrapped stage runs; with ``materialize`` on this
        includes computing (and caching) the output.
        """
        java_obj = require_java_obj(
            self, "TimerModel.lastTransformMillis", "the time is also in the driver's log (INFO)"
        )
        return int(java_obj.lastTransformMillis())
