"""Executors in their own JVMs get the jar and OpenCV and decode there (Spark's local-cluster)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import run_job

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    import mmlspark
    from mmlspark.image import read_images
    from image_fixtures import BAD, write_all

    spark = mmlspark.session("local-cluster[2,1,1024]", {"spark.ui.enabled": "false"})
    folder = Path(sys.argv[1])
    files = write_all(folder, large=False)
    df = read_images(spark, str(folder)).selectExpr("path", "image.height AS h", "error")
    rows = {Path(r.path).name: r for r in df.collect()}
    assert set(rows) == set(files), sorted(rows)
    assert all((rows[n].error is None) == (n not in BAD) for n in files), rows
    # The driver JVM never loaded OpenCV: decoding ran in the executors.
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print("cluster-ok", len(rows), executors)
    spark.stop()
    """
)


@pytest.mark.system
def test_read_images_on_executors_in_separate_jvms(tmp_path):
    result = run_job(tmp_path, SCRIPT, str(tmp_path / "photos"))
    assert "cluster-ok 14 2" in result.stdout
