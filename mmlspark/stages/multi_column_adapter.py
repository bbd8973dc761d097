"""MultiColumnAdapter, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.base import Estimator, Transformer
from pyspark.sql import DataFrame

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import require, require_absent, require_column, require_distinct
from mmlspark.stages._MultiColumnAdapter import _MultiColumnAdapter

# The base stage is any pyspark stage: its column params can only be found by their names, the
# single-column pair or, as SynapseML also takes, the list pair given one column each.
_SINGLE = ("inputCol", "outputCol")
_LISTS = ("inputCols", "outputCols")


class MultiColumnAdapter(_MultiColumnAdapter):
    __doc__ = _MultiColumnAdapter.__doc__
    _python_backend = True

    def _pair_stages(self) -> list[Any]:
        """One copy of ``baseStage`` per pair of ``inputCols`` and ``outputCols``, in order,
        with the checks and messages of the JVM stage; the base stage is left unchanged."""
        require(self, self.isDefined(self.baseStage), row_message("noBaseStage"))
        require(
            self,
            self.isDefined(self.inputCols) and self.isDefined(self.outputCols),
            row_message("adapterCols"),
        )
        ins, outs = list(self.getInputCols()), list(self.getOutputCols())
        require(
            self,
            len(ins) == len(outs),
            row_message("adapterCount", inputs=len(ins), outputs=len(outs)),
        )
        require_distinct(self, "outputCols", outs)
        base = self.getBaseStage()
        require(
            self,
            isinstance(base, (Transformer, Estimator)),
            row_message("notAStage", stage=type(base).__name__),
        )
        single = all(base.hasParam(p) for p in _SINGLE)
        require(
            self,
            single or all(base.hasParam(p) for p in _LISTS),
            row_message("notSingleColumn", stage=type(base).__name__),
        )
        copies = []
        for i, o in zip(ins, outs, strict=True):
            names, values = (_SINGLE, (i, o)) if single else (_LISTS, ([i], [o]))
            copies.append(
                base.copy({base.getParam(n): v for n, v in zip(names, values, strict=True)})
            )
        return copies

    def _fit(self, dataset: DataFrame) -> PipelineModel:
        """On the Python backend: fits a ``Pipeline`` of the copies of ``baseStage`` (any pyspark
        stage that runs in the session), giving its ``PipelineModel``."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        stages = self._pair_stages()
        schema = dataset.schema
        for name in self.getInputCols():
            require_column(self, schema, name)
        for name in self.getOutputCols():
            require_absent(self, schema, name)
        return Pipeline(stages=stages).fit(dataset)
