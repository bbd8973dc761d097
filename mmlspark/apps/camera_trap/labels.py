"""Ground truth: photos labelled by a COCO Camera Traps (CCT) JSON or by their folder."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mmlspark.apps.camera_trap.session import _qualified
from mmlspark.apps.camera_trap.settings import JobError


@dataclass
class CctLabels:
    """Ground truth from a COCO Camera Traps JSON: file name -> category, its sequences, the
    times its photos were taken and the boxes of its annotations."""

    labels: dict[str, str]
    sequences: dict[str, str]
    corrupt: set[str]
    #: Annotations naming an image or category the file does not have (left out, not fatal).
    dangling: int = 0
    #: File name -> the boxes of its annotations that have one, [x, y, width, height] as
    #: fractions of the image (CCT writes pixels; images without width and height are left out).
    boxes: dict[str, list[list[float]]] = field(default_factory=dict)
    #: File name -> the image's `datetime` in seconds (its local time read as UTC).
    times: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def read(path: str) -> CctLabels:
        try:
            data = json.loads(Path(path).read_text())
            categories = {c["id"]: c["name"] for c in data["categories"]}
            names = {i["id"]: i["file_name"] for i in data["images"]}
            labels: dict[str, str] = {}
            dangling = 0
            for a in data.get("annotations", []):
                if a.get("image_id") in names and a.get("category_id") in categories:
                    labels.setdefault(names[a["image_id"]], categories[a["category_id"]])
                else:
                    dangling += 1
            sequences = {i["file_name"]: str(i["seq_id"]) for i in data["images"] if "seq_id" in i}
            times = {
                i["file_name"]: seconds
                for i in data["images"]
                if (seconds := _cct_seconds(i.get("datetime"))) is not None
            }
            corrupt = {i["file_name"] for i in data["images"] if i.get("corrupt")}
            sizes = {
                i["id"]: (float(i["width"]), float(i["height"]))
                for i in data["images"]
                if i.get("width") and i.get("height")
            }
            boxes: dict[str, list[list[float]]] = {}
            for a in data.get("annotations", []):
                if a.get("bbox") is not None and a.get("image_id") in sizes:
                    w, h = sizes[a["image_id"]]
                    x, y, bw, bh = (float(v) for v in a["bbox"])
                    boxes.setdefault(names[a["image_id"]], []).append(
                        [x / w, y / h, bw / w, bh / h]
                    )
        except RecursionError:
            raise JobError(
                f"cannot read COCO Camera Traps labels from {path}: nested too deeply"
            ) from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise JobError(f"cannot read COCO Camera Traps labels from {path}: {e!r}") from None
        return CctLabels(labels, sequences, corrupt, dangling, boxes, times)


def _cct_seconds(value: Any) -> float | None:
    """A CCT `datetime` ("2024-05-01 10:00:00", or EXIF's "2024:05:01 10:00:00") in seconds,
    read as UTC; None when absent or not a time."""
    if not isinstance(value, str):
        return None
    for pattern in ("%Y-%m-%d %H:%M:%S", "%Y:%m:%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            parsed = datetime.datetime.strptime(value.strip()[:19], pattern)
        except ValueError:
            continue
        return parsed.replace(tzinfo=datetime.timezone.utc).timestamp()
    return None


def with_labels(spark: SparkSession, df: DataFrame, images: str, labels: str | None) -> DataFrame:
    """Adds `relative_path` and `label`: the CCT category, or the photo's folder name."""
    root = _qualified(spark, images)
    df = df.withColumn("relative_path", F.expr(f"substring(path, {len(root) + 2})"))
    if labels is None:
        return df.withColumn("label", F.regexp_extract("path", r"/([^/]+)/[^/]+$", 1))
    cct = CctLabels.read(labels)
    # Photos the survey marked corrupt are neither trained on nor judged.
    known = sorted((f, label) for f, label in cct.labels.items() if f not in cct.corrupt)
    truth = spark.createDataFrame(known, "relative_path string, label string")
    # Broadcast: a shuffle join would leave the photos in spark.sql.shuffle.partitions pieces.
    return df.join(F.broadcast(truth), "relative_path", "left")
