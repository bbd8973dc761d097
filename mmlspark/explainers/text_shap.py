"""TextSHAP, on the JVM or the Python backend."""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine import explain
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.explainers import _backend as B
from mmlspark.explainers import _text
from mmlspark.explainers._TextSHAP import _TextSHAP

SIZE = B.PREFIX + "size"


class TextSHAP(_TextSHAP):
    """Kernel SHAP values of the tokens of the text column ``inputCol`` of each row. The text is
    lowercased and split at whitespace into tokens, written to ``tokensCol``; a coalition keeps
    some tokens and is scored by the model as their text joined by spaces (an absent token is
    dropped). Per target class, a vector ``[base value, phi_1, ..., phi_M]``: the base value is
    the model's value of the empty text, and the phis sum to the row's value less it. Every
    coalition is scored (the exact Shapley values) where ``numSamples`` (unset:
    ``2 * M + 2048``) covers them, i.e. up to 11 tokens by default. A row without tokens gets null
    outputs.

    Examples
    --------
    >>> shap = TextSHAP(inputCol="text", model=model, targetClasses=[1])  # doctest: +SKIP
    >>> shap.transform(reviews).select("tokens", "explanation")  # doctest: +SKIP
    """

    __doc__ = (__doc__ or "") + "\n" + (_TextSHAP.__doc__ or "")
    _python_backend = True

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        spec = self._spec()
        data = _text.tokenized(self, spec, dataset)
        rows = B.indexed(spec, data)
        explained = B.complete(rows, [_text.PRESENT])
        sizes = sorted(
            r[0] for r in explained.select(F.size(B.col(_text.TOKENS))).distinct().collect()
        )
        by_size = {
            m: explain.coalitions(
                m,
                spec.numSamples if spec.numSamples is not None else explain.default_samples(m),
                B.SEED,
            )
            for m in sizes
        }
        masks = dataset.sparkSession.createDataFrame(
            [
                (m, i, [float(v) for v in mask])
                for m in sizes
                for i, mask in enumerate(by_size[m].masks)
            ],
            T.StructType(
                [
                    T.StructField(SIZE, T.IntegerType()),
                    T.StructField(B.SAMPLE, T.IntegerType()),
                    T.StructField(B.MASK, T.ArrayType(T.DoubleType())),
                ]
            ),
        )
        samples = (
            explained.join(F.broadcast(masks), F.size(B.col(_text.TOKENS)) == B.col(SIZE))
            .withColumn(str(spec.inputCol), _text.kept(B.col(B.MASK)))
            .drop(B.MASK)
        )
        grouped = (
            B.score(spec, samples, [SIZE])
            .groupBy(F.col(B.ID).alias("id"), F.col("k"))
            .agg(
                F.first(B.col(SIZE)).alias("m"),
                F.collect_list(B.col(B.SAMPLE)).alias("samples"),
                F.collect_list("y").alias("ys"),
            )
        )
        fits = map_in_arrow(
            grouped, functools.partial(explain.sized_shap_partition, by_size), B.FIT_SCHEMA
        )
        return _text.named(spec, B.output(spec, rows, fits))
