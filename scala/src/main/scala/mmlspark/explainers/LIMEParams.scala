package mmlspark.explainers

/** The params of the LIME explainers beyond the common ones: the kernel and the penalty. */
private[explainers] trait LIMEParams extends ExplainerParams with LIMEParamsDecls {
  setDefault(regularization -> 0.0, numSamples -> 1000)
}
