"""ComputePerInstanceStatistics, taking SynapseML's names for its score columns too."""

from __future__ import annotations

from mmlspark.core.aliases import synapseml_names
from mmlspark.train._ComputePerInstanceStatistics import _ComputePerInstanceStatistics
from mmlspark.train.compute_model_statistics import SCORE_COLUMNS


@synapseml_names(SCORE_COLUMNS)
class ComputePerInstanceStatistics(_ComputePerInstanceStatistics):
    __doc__ = _ComputePerInstanceStatistics.__doc__
