"""ComputeModelStatistics, taking SynapseML's names for its score columns too."""

from __future__ import annotations

from mmlspark.core.aliases import synapseml_names
from mmlspark.train._ComputeModelStatistics import _ComputeModelStatistics

# SynapseML's names for the score columns the statistics stages read.
SCORE_COLUMNS = {
    "scoredLabelsCol": "predictionCol",
    "scoredProbabilitiesCol": "probabilityCol",
    "scoresCol": "probabilityCol",
}


@synapseml_names(SCORE_COLUMNS)
class ComputeModelStatistics(_ComputeModelStatistics):
    __doc__ = _ComputeModelStatistics.__doc__
