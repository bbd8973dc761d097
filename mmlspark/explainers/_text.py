"""What TextLIME and TextSHAP share on the Python backend (the JVM's ``TextInput``): the checks,
the tokens, a sample's text and the hashed draws that decide which tokens a sample keeps."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.explainers import _backend as B

TOKENS, PRESENT = B.PREFIX + "tokens", B.PREFIX + "present"


def tokens(text: Column) -> Column:
    """A text's tokens: lowercased, split at whitespace, empty strings dropped."""
    return F.filter(F.split(F.lower(text), r"\s+"), lambda t: F.length(t) > 0)


def kept(keep: Column) -> Column:
    """The text of a sample: the tokens whose `keep` (array<double>) is 1, joined by spaces."""
    return F.array_join(
        F.transform(B.col(TOKENS), lambda t, i: F.when(F.element_at(keep, i + 1) == 1.0, t)), " "
    )


def uniform(sample: Column, i: Column) -> Column:
    """A uniform draw in [0, 1) per (row's tokens, sample, token index): the JVM's hash."""
    hashed = F.xxhash64(F.lit(B.SEED).cast("long"), B.col(TOKENS), sample, i)
    return hashed.bitwiseAND(F.lit((1 << 52) - 1)).cast("double") / F.lit(float(1 << 52))


def tokenized(stage: Any, spec: Any, dataset: DataFrame) -> DataFrame:
    """The JVM's checks (``TextInput.checkTextSchema``) before any job; the rows with their
    tokens and, where there is at least one, the flag that makes them explained."""
    schema = dataset.schema
    B.require(stage, spec.inputCol is not None, row_message("explainNoTextCol"))
    B.require_column_type(
        stage,
        schema,
        spec.inputCol,
        row_message("explainedText"),
        lambda t: isinstance(t, T.StringType),
    )
    B.require_absent(stage, schema, spec.tokensCol)
    B.require_distinct(
        stage,
        "tokensCol, outputCol and metricsCol",
        [spec.tokensCol, spec.outputCol, spec.metricsCol],
    )
    B.check_common(stage, spec, dataset)
    B.require_batch(stage, dataset)
    return dataset.withColumn(TOKENS, tokens(B.col(spec.inputCol))).withColumn(
        PRESENT, F.when(F.size(B.col(TOKENS)) > 0, F.lit(True))
    )


def named(spec: Any, explained: DataFrame) -> DataFrame:
    """The explained rows with the tokens' column named tokensCol, after the input's columns."""
    cols = [c for c in explained.columns if c not in (TOKENS, PRESENT)]
    outputs = (spec.outputCol, spec.metricsCol)
    inputs = [B.col(c) for c in cols if c not in outputs]
    return explained.select(
        *inputs,
        B.col(TOKENS).alias(spec.tokensCol),
        *[B.col(c) for c in cols if c in outputs],
    )
