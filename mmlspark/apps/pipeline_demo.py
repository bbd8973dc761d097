"""A small end-to-end pipeline of mmlspark's utility stages on local Spark.

Run with ``make demo`` or ``python -m mmlspark.apps.pipeline_demo [--out DIR]``. It builds
a skewed, bursty data set in code, balances its classes, batches and un-batches it, averages
per-burst scores, saves the fitted pipeline, reloads it, and checks that the reloaded pipeline
gives identical results.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from pyspark.ml import Pipeline, PipelineModel

import mmlspark
from mmlspark.stages import (
    ClassBalancer,
    EnsembleByKey,
    FlattenBatch,
    MiniBatchTransformer,
    SelectColumns,
    Timer,
    TimerModel,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="where to save the fitted pipeline")
    parser.add_argument("--rows", type=int, default=2000, help="number of synthetic photos")
    args = parser.parse_args(argv)

    spark = mmlspark.session(
        "local[*]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    rng = np.random.default_rng(0)
    species = rng.choice(
        ["empty", "deer", "fox", "badger"], p=[0.7, 0.2, 0.07, 0.03], size=args.rows
    )
    rows = [(i, int(i // 5), str(s), float(rng.random())) for i, s in enumerate(species)]
    photos = spark.createDataFrame(rows, "photo long, burst long, species string, score double")

    pipeline = Pipeline(
        stages=[
            ClassBalancer(inputCol="species", outputCol="weight"),
            MiniBatchTransformer(miniBatchSize=64),
            FlattenBatch(),
            Timer(stage=SelectColumns(cols=["photo", "burst", "species", "weight", "score"])),
        ]
    )
    model = pipeline.fit(photos)
    scored = model.transform(photos)
    bursts = EnsembleByKey(keys=["burst"], cols=["score", "weight"]).transform(scored)

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="mmlspark-demo-"))
    model.write().overwrite().save(str(out / "pipeline"))
    reloaded = PipelineModel.load(str(out / "pipeline"))
    same = sorted(reloaded.transform(photos).collect()) == sorted(scored.collect())

    weights = {
        r["species"]: r["weight"] for r in scored.select("species", "weight").distinct().collect()
    }
    print(f"mmlspark {mmlspark.__version__} on Spark {spark.version}")
    print(f"photos: {scored.count()}, bursts: {bursts.count()}")
    for name, weight in sorted(weights.items()):
        print(f"  class weight {name:>7}: {weight:.3f}")
    timer = model.stages[-1]
    assert isinstance(timer, TimerModel)
    print(f"timer: pipeline transform took {timer.lastTransformMillis()} ms")
    print(f"saved to {out / 'pipeline'}; reloaded pipeline gives identical rows: {same}")
    spark.stop()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
