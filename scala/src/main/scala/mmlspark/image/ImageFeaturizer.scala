package mmlspark.image

import mmlspark.contracts.MovedStage

/** The featurizer's former name: the stage is `mmlspark.onnx.ImageFeaturizer` now, where SynapseML
  * has it. Stages and pipelines saved under this name load as that class, with `load` here, the new
  * class's `load` or `PipelineModel.load`.
  */
object ImageFeaturizer extends MovedStage(mmlspark.onnx.ImageFeaturizer)
