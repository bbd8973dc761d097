package mmlspark.image

import mmlspark.contracts.MovedStage

/** The augmenter's former name: the stage is `mmlspark.opencv.ImageSetAugmenter` now, where
  * SynapseML has it. Stages and pipelines saved under this name load as that class, with `load`
  * here, the new class's `load` or `PipelineModel.load`.
  */
object ImageSetAugmenter extends MovedStage(mmlspark.opencv.ImageSetAugmenter)
