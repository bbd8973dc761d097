"""The JVM helpers of the camera-trap app (its chart drawing), with named, typed arguments: the
only Python code that names their JVM classes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mmlspark.core.jvm import classic_jvm, jvm_class

_CHARTS = "mmlspark.apps.cameratrap.Charts"
_INSTEAD = "draw the chart from a classic session"


def draw_confusion_matrix(
    spark: Any, *, labels: Sequence[str], matrix: Sequence[Sequence[int]], path: str
) -> None:
    """``Charts.confusionMatrix``: writes the matrix (rows: true label, columns: predicted) as a
    PNG image to ``path``."""
    jvm = classic_jvm(spark, feature="draw_confusion_matrix", instead=_INSTEAD)
    charts = jvm_class(jvm, _CHARTS)
    charts.confusionMatrix(json.dumps({"labels": list(labels), "matrix": matrix}), path)


def draw_image_grid(
    spark: Any, *, samples: Sequence[dict[str, Any]], columns: int, cell_size: int, path: str
) -> None:
    """``Charts.imageGrid``: writes the photos of ``samples`` (each ``{"path", "caption"}``, and
    optionally ``"boxes": [{"bbox": [x, y, w, h] as fractions, "label"}]``) as a PNG grid of
    ``columns`` columns of ``cell_size``-pixel cells to ``path``."""
    jvm = classic_jvm(spark, feature="draw_image_grid", instead=_INSTEAD)
    charts = jvm_class(jvm, _CHARTS)
    charts.imageGrid(json.dumps(list(samples)), columns, cell_size, path)


def taken_times(files: Any, out_col: str) -> Any:
    """``TakenTimes.add``: ``files`` (a listing with ``path``) with ``out_col``, each photo's
    EXIF DateTimeOriginal in seconds (null without one), read from the first 128 KiB of each file
    in the tasks."""
    from pyspark.sql import DataFrame

    spark = files.sparkSession
    jvm = classic_jvm(spark, feature="taken_times", instead="run the job on a classic session")
    added = jvm_class(jvm, "mmlspark.apps.cameratrap.TakenTimes").add(files._jdf, out_col)
    return DataFrame(added, spark)
