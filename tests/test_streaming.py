"""Structured Streaming: photos dropped into a folder are read as a stream, scored by a saved
pipeline (ImageTransformer + ONNXModel with softmax and argmax) and written to Parquet with a
checkpoint. Across restarts every file gives exactly one row, equal to the batch result.

The test runs on a classic and on a Spark Connect session from one body (the pipeline is saved on
the classic one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.ml import PipelineModel

from mmlspark.apps.camera_trap import job
from mmlspark.image import read_image_stream, read_images
from mmlspark.onnx import ONNXModel
from mmlspark.opencv import ImageTransformer

PHOTOS = sorted((job.DEMO_DATA / "images").glob("*/*.jpg"))


def scored_columns(df):
    return df.select(
        "path",
        "error",
        "onnxError",
        "probability",
        "prediction",
    )


@pytest.fixture(scope="module")
def saved_pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream-model") / "model"
    model = PipelineModel(
        stages=[
            ImageTransformer(inputCol="image", outputCol="tensor", toTensor=True)
            .resize(height=32, width=32)
            .normalize(mean=[0.5] * 3, std=[0.25] * 3, colorScaleFactor=1 / 255),
            ONNXModel(
                modelLocation=str(job.DEMO_DATA / "featurizer.onnx"),
                feedDict={"image": "tensor"},
                fetchDict={"logits": "logits"},
                softMaxDict={"logits": "probability"},
                argMaxDict={"logits": "prediction"},
            ),
        ]
    )
    model.write().save(str(path))
    return str(path)


def drop(folder: Path, photos: list[Path]) -> None:
    """Files appear whole: written next to the folder, then moved in."""
    staging = folder.parent / "staging"
    staging.mkdir(exist_ok=True)
    for photo in photos:
        shutil.copyfile(photo, staging / photo.name)
        (staging / photo.name).rename(folder / photo.name)


def run_once(spark, model: str, incoming: Path, out: Path, checkpoint: Path) -> None:
    stream = PipelineModel.load(model).transform(read_image_stream(spark, str(incoming)))
    query = (
        scored_columns(stream)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(out))
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def test_stream_scores_each_new_file_once_across_restarts(session, saved_pipeline, tmp_path):
    incoming, out, checkpoint = tmp_path / "incoming", tmp_path / "out", tmp_path / "checkpoint"
    incoming.mkdir()
    first, second = PHOTOS[0::10], PHOTOS[5::10]
    drop(incoming, first)
    run_once(session, saved_pipeline, incoming, out, checkpoint)
    assert session.read.parquet(str(out)).count() == len(first)

    # A restart with nothing new writes nothing; new files (one of them broken) are added once.
    run_once(session, saved_pipeline, incoming, out, checkpoint)
    drop(incoming, second)
    (tmp_path / "staging" / "broken.jpg").write_bytes(b"\xff\xd8 truncated")
    (tmp_path / "staging" / "broken.jpg").rename(incoming / "broken.jpg")
    run_once(session, saved_pipeline, incoming, out, checkpoint)

    rows = {Path(r.path).name: r for r in session.read.parquet(str(out)).collect()}
    total = session.read.parquet(str(out)).count()
    names = {p.name for p in first + second} | {"broken.jpg"}
    assert total == len(names) == len(rows), "a file was scored twice or not at all"
    assert set(rows) == names
    assert rows["broken.jpg"].error and rows["broken.jpg"].prediction is None
    assert all(r.prediction in (0, 1, 2) for n, r in rows.items() if n != "broken.jpg")

    # The same pipeline on the same files as a batch gives the same values.
    batch = scored_columns(
        PipelineModel.load(saved_pipeline).transform(read_images(session, str(incoming)))
    ).collect()
    assert len(batch) == len(names)
    for expected in batch:
        row = rows[Path(expected.path).name]
        assert row.prediction == expected.prediction
        if expected.probability is None:
            assert row.probability is None
        else:
            assert list(row.probability) == pytest.approx(list(expected.probability), rel=1e-9)
