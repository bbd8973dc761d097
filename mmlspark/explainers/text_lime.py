"""TextLIME, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mmlspark._engine import explain
from mmlspark.explainers import _backend as B
from mmlspark.explainers import _text
from mmlspark.explainers._TextLIME import _TextLIME


class TextLIME(_TextLIME):
    """LIME for the tokens of the text column ``inputCol`` of each row. The text is lowercased and
    split at whitespace into tokens, written to ``tokensCol``; each sample keeps each token with
    chance ``samplingFraction`` (the first sample keeps them all) and is scored by the model as the
    kept tokens joined by spaces. The samples are weighted by the kernel
    ``sqrt(exp(-d^2 / kernelWidth^2))``, ``d^2`` the number of tokens dropped (``kernelWidth``
    unset: ``0.75 * sqrt(number of tokens)``), and fitted by a weighted ridge regression on the
    tokens' presence. Per target class, a vector of one weight per token; in ``metricsCol`` the
    weighted r2 of the fit. A row without tokens gets null outputs.

    Examples
    --------
    >>> lime = TextLIME(inputCol="text", model=model, targetClasses=[1],
    ...                 numSamples=500)  # doctest: +SKIP
    >>> lime.transform(reviews).select("tokens", "explanation")  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_TextLIME.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        data = _text.tokenized(self, spec, dataset)
        sample = B.col(B.SAMPLE)
        keep = F.transform(
            B.col(_text.TOKENS),
            lambda _, i: (
                F.when(sample == 0, F.lit(1.0))
                .when(_text.uniform(sample, i) < F.lit(float(spec.samplingFraction)), F.lit(1.0))
                .otherwise(F.lit(0.0))
            ),
        )
        sampled = [(B.REP, keep), (str(spec.inputCol), _text.kept(B.col(B.REP)))]
        plan = explain.LimePlan(None, spec.kernelWidth, float(spec.regularization))
        return _text.named(spec, B.lime_of(spec, data, [_text.PRESENT], sampled, plan))
