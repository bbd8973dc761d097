"""ImageLIME and ImageSHAP on the Python backend: the JVM's plan (``ImageExplaining``) in
pyspark's DataFrame operations and Arrow UDFs of the engine (``mmlspark._engine.superpixels``).
Each image is brought to the model's size once (the leading geometric operations of the model's
first ImageTransformer, or a decode), segmented once, and each sample is that image with some
superpixels black, scored by the rest of the model in one transform."""

from __future__ import annotations

import functools
import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.arrow_map import map_in_arrow
from mmlspark.core.checks import require, require_absent, require_column_type, require_distinct
from mmlspark.core.fused import Step, run_step
from mmlspark.explainers import _backend as B
from mmlspark.opencv._backend import binary_or_image, image_type

IMG, IMG_ERROR = B.PREFIX + "image", B.PREFIX + "imageError"
SP, COUNT, SAMPLES = B.PREFIX + "superpixels", B.PREFIX + "count", B.PREFIX + "samples"
#: The image operations that run once per image, before the superpixels (the JVM's).
GEOMETRIC = ("resize", "resizeShorter", "crop", "centerCrop", "letterbox", "flip")


def superpixel_type() -> T.StructType:
    """The superpixels' column type, the JVM's ``SuperpixelData``."""
    return T.StructType(
        [
            T.StructField("height", T.IntegerType(), False),
            T.StructField("width", T.IntegerType(), False),
            T.StructField("labels", T.ArrayType(T.IntegerType(), containsNull=False), True),
            T.StructField("sourceHeight", T.IntegerType(), True),
            T.StructField("sourceWidth", T.IntegerType(), True),
            T.StructField("transform", T.ArrayType(T.DoubleType(), containsNull=False), True),
        ]
    )


def check_image_schema(stage: Any, spec: Any, data: DataFrame) -> T.StructType:
    """The JVM's ImageExplainerParams.checkImageSchema, before any job; the output schema."""
    require(stage, spec.inputCol is not None, row_message("explainNoImageCol"))
    require_column_type(
        stage, data.schema, spec.inputCol, row_message("explainedImage"), binary_or_image
    )
    schema = B.check_common(stage, spec, data)
    require_absent(stage, data.schema, spec.superpixelCol)
    require_distinct(
        stage,
        "outputCol, metricsCol and superpixelCol",
        [spec.outputCol, spec.metricsCol, spec.superpixelCol],
    )
    return T.StructType([*schema.fields, T.StructField(spec.superpixelCol, superpixel_type())])


def _view(ops: list[dict[str, Any]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The leading geometric operations as (name, integer arguments), the JVM's defaults filled
    in, for the engine's ``view``."""
    from mmlspark._engine.ops import parse_ops
    from mmlspark.opencv._ImageOps import OPERATIONS

    fields = {
        "resize": ("height", "width"),
        "resizeShorter": ("size",),
        "crop": ("x", "y", "height", "width"),
        "centerCrop": ("height", "width"),
        "letterbox": ("size",),
        "flip": ("flipCode",),
    }
    parsed = parse_ops(json.dumps(ops), OPERATIONS)
    return tuple((op.op, tuple(int(op[f]) for f in fields[op.op])) for op in parsed)


def _split(
    spec: Any, model: Any, schema: T.StructType
) -> tuple[Any, tuple[tuple[str, tuple[int, ...]], ...], list[Any], str, bool]:
    """The stage that brings each image to the model's size once and its operations, the stages
    that score the samples, the column a sample is written to, and whether as PNG bytes (the
    JVM's split)."""
    from pyspark.ml import PipelineModel

    from mmlspark.opencv import ImageTransformer

    stages = list(model.stages) if isinstance(model, PipelineModel) else [model]
    sizing = ImageTransformer(inputCol=spec.inputCol, outputCol=IMG, errorCol=IMG_ERROR)
    first = stages[0] if stages else None
    if isinstance(first, ImageTransformer) and first.getInputCol() == spec.inputCol:
        ops = first.getOps()
        cut = next((i for i, op in enumerate(ops) if op["op"] not in GEOMETRIC), len(ops))
        sizing.setOperations(json.dumps(ops[:cut]))
        sizing.setReducedDecode(first.getReducedDecode())
        rest = first.copy().setInputCol(IMG).setOperations(json.dumps(ops[cut:]))
        return sizing, _view(ops[:cut]), [rest, *stages[1:]], IMG, False
    encode = isinstance(schema[spec.inputCol].dataType, T.BinaryType)
    return sizing, (), stages, spec.inputCol, encode


def explain(stage: Any, spec: Any, dataset: DataFrame, plan_fields: dict[str, Any]) -> DataFrame:
    """The explanations of every row (``ImageExplaining.explain``)."""
    # the engine's image code needs pyarrow (mmlspark[cpu]), which the JVM backend does not
    from mmlspark._engine import superpixels as S

    check_image_schema(stage, spec, dataset)
    B.require_batch(stage, dataset)
    model = B.model_of(stage, spec)
    sizing, view, scoring, target, encode = _split(spec, model, dataset.schema)
    plan = S.ImagePlan(
        image_col=IMG,
        superpixel_col=SP,
        count_col=COUNT,
        samples_col=SAMPLES,
        sample_col=B.SAMPLE,
        target_col=target,
        encode=encode,
        cell_size=float(spec.cellSize),
        modifier=float(spec.modifier),
        seed=B.SEED,
        source_col=spec.inputCol,
        view=view,
        **plan_fields,
    )
    indexed = B.indexed(spec, dataset)
    sized = sizing.transform(indexed)
    segmented = run_step(
        sized,
        Step(S.segment_partition, plan),
        [
            T.StructField(SP, superpixel_type(), True),
            T.StructField(COUNT, T.IntegerType(), True),
            T.StructField(SAMPLES, T.IntegerType(), True),
        ],
        lambda out: out.filter(B.col(SP).isNotNull()),
        ends_chain=True,
    )
    # each sample holds its model-size image only: not the photo (in inputCol, read once)
    dropped = [SAMPLES, IMG_ERROR] + ([spec.inputCol] if target == IMG else [])
    samples = segmented.withColumn(
        B.SAMPLE, F.explode(F.sequence(F.lit(0), B.col(SAMPLES) - 1))
    ).drop(*dropped)
    kind = T.BinaryType() if encode else image_type()
    inputs = run_step(
        samples,
        Step(S.perturb_partition, plan),
        [T.StructField(target, kind, True)],
        lambda out: out,
        keep=tuple(c for c in samples.columns if c not in (target, IMG)),
    )
    scored = functools.reduce(lambda df, t: t.transform(df), scoring, inputs)
    keep = [B.col(B.ID), B.col(B.SAMPLE), B.col(SP), B.col(COUNT)]
    values = scored.select(*keep, B.targets(spec, scored).alias("t")).select(
        *keep, F.posexplode(F.col("t")).alias("k", "y")
    )
    grouped = values.groupBy(B.col(B.ID).alias("id"), F.col("k")).agg(
        F.first(B.col(SP)).alias("superpixels"),
        F.first(B.col(COUNT)).alias("count"),
        F.collect_list(B.col(B.SAMPLE)).alias("samples"),
        F.collect_list("y").alias("ys"),
    )
    fit_schema = T.StructType(
        [*B.FIT_SCHEMA.fields, T.StructField("superpixels", superpixel_type(), True)]
    )
    fits = map_in_arrow(
        grouped, functools.partial(S.image_fit_partition, plan), fit_schema
    ).withColumnRenamed("superpixels", SP)
    return B.output(spec, indexed, fits, [SP]).withColumnRenamed(SP, spec.superpixelCol)
