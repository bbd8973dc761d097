"""EnsembleByKey, whose getColNames gives the output names also when they were not set."""

from __future__ import annotations

from mmlspark.stages._EnsembleByKey import _EnsembleByKey


class EnsembleByKey(_EnsembleByKey):
    __doc__ = _EnsembleByKey.__doc__

    def getColNames(self) -> list[str]:
        """The names of the output columns: those set, else ``mean(<col>)`` for each of ``cols``,
        the names the transform gives them (as SynapseML's getter returns them)."""
        names = super().getColNames()
        if names or not self.isDefined(self.cols):
            return names
        return [f"mean({c})" for c in self.getCols()]
