"""The fluent methods generated from the JVM's image operation registry write what the JVM writes,
and an ImageTransformer saved before the registry existed loads and transforms as it did."""

from __future__ import annotations

import inspect
import json
from typing import Any

import cv2
import numpy as np
import pytest
from image_fixtures import encode, pattern

from mmlspark.image import read_images
from mmlspark.opencv import ImageTransformer
from mmlspark.opencv._ImageOps import OPERATIONS

# The metadata of an ImageTransformer saved by the code before the registry (its Python fluent
# methods wrote `operations`), and the JVM's re-encoding of those operations at the time.
SAVED_BEFORE = r"""{"class":"mmlspark.opencv.ImageTransformer","timestamp":1795478780349,"sparkVersion":"4.3.0","uid":"ImageTransformer_b0dfd13158d4","paramMap":{"inputCol":"img","operations":"[{\"op\": \"resize\", \"height\": 20, \"width\": 30, \"interpolation\": 1}, {\"op\": \"resizeShorter\", \"size\": 16, \"interpolation\": 0}, {\"op\": \"resize\", \"height\": 12, \"width\": 12, \"interpolation\": 1}, {\"op\": \"crop\", \"x\": 1, \"y\": 2, \"height\": 10, \"width\": 11}, {\"op\": \"centerCrop\", \"height\": 8, \"width\": 9}, {\"op\": \"colorFormat\", \"format\": \"RGB\"}, {\"op\": \"flip\", \"flipCode\": 1}, {\"op\": \"flip\", \"flipCode\": 0}, {\"op\": \"blur\", \"height\": 3, \"width\": 5}, {\"op\": \"threshold\", \"threshold\": 100, \"maxVal\": 200.5, \"thresholdType\": 2}, {\"op\": \"gaussianKernel\", \"apertureSize\": 5, \"sigma\": 1.5}, {\"op\": \"normalize\", \"mean\": [0.5, 0.25, 0.125], \"std\": [2.0, 4.0, 8.0], \"colorScaleFactor\": 0.00392156862745098}]","outputCol":"out","tensorChannelOrder":"BGR","toTensor":true},"defaultParamMap":{"errorCol":"transformError","inputCol":"image","operations":"[]","outputCol":"transformed","tensorChannelOrder":"RGB","toTensor":false}}"""  # noqa: E501
REENCODED_BEFORE = '[{"op":"resize","height":20,"width":30,"interpolation":1},{"op":"resizeShorter","size":16,"interpolation":0},{"op":"resize","height":12,"width":12,"interpolation":1},{"op":"crop","x":1,"y":2,"height":10,"width":11},{"op":"centerCrop","height":8,"width":9},{"op":"colorFormat","format":"RGB"},{"op":"flip","flipCode":1},{"op":"flip","flipCode":0},{"op":"blur","height":3,"width":5},{"op":"threshold","threshold":100.0,"maxVal":200.5,"thresholdType":2},{"op":"gaussianKernel","apertureSize":5,"sigma":1.5},{"op":"normalize","mean":[0.5,0.25,0.125],"std":[2.0,4.0,8.0],"colorScaleFactor":0.00392156862745098}]'  # noqa: E501


def _jvm_ops(spark, operations: str) -> list[dict[str, Any]]:
    """The operations as the JVM reads them and writes them back."""
    jvm = spark._jvm.mmlspark.opencv
    stage = jvm.ImageTransformer().setOperations(operations)
    return json.loads(jvm.ImageOp.toJson(stage.getOps()))


def test_generated_methods_cover_the_jvm_registry(spark):
    names = spark._jvm.mmlspark.opencv.ImageOp.names().mkString(",").split(",")
    assert list(OPERATIONS) == names
    for name, op in OPERATIONS.items():
        method = getattr(ImageTransformer, op["method"])
        params = list(inspect.signature(method).parameters.values())[1:]
        if name != "resize":  # resize's hand-written override adds the size form
            assert [p.name for p in params] == op["fields"], name


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_each_generated_method_writes_what_the_jvm_writes(spark, name):
    op = OPERATIONS[name]
    example = op["example"]
    required = {k: v for k, v in example.items() if k not in op["defaults"]}
    for args in (example, required):
        method = getattr(ImageTransformer(), op["method"])
        written = method(**args).getOps()
        assert written == _jvm_ops(spark, json.dumps([{"op": name, **args}])), args
        assert written[0]["op"] == name and list(written[0])[1:] == op["fields"]


def test_python_and_scala_fluent_methods_agree(spark):
    gateway = spark.sparkContext._gateway

    def doubles(values: list[float]):
        array = gateway.new_array(gateway.jvm.double, len(values))
        for i, v in enumerate(values):
            array[i] = v
        return array

    scala = (
        spark._jvm.mmlspark.opencv.ImageTransformer()
        .resize(20, 30)
        .resize(16, True)
        .resize(12, False)
        .crop(1, 2, 10, 11)
        .centerCrop(8, 9)
        .colorFormat("GRAY")
        .flip(-1)
        .blur(3, 5)
        .threshold(100.0, 200.5, 2)
        .gaussianKernel(5, 1.5)
        .normalize(doubles([0.5]), doubles([0.25]), 1.0)
    )
    python = (
        ImageTransformer()
        .resize(20, 30)
        .resize(size=16, keepAspectRatio=True)
        .resize(size=12)
        .crop(1, 2, 10, 11)
        .centerCrop(8, 9)
        .colorFormat("GRAY")
        .flip(-1)
        .blur(3, 5)
        .threshold(100, 200.5, cv2.THRESH_TRUNC)
        .gaussianKernel(5, 1.5)
        .normalize([0.5], [0.25])
    )
    assert python.getOps() == json.loads(scala.getOperations())


def test_transformer_saved_before_the_registry_loads_and_transforms_alike(spark, tmp_path):
    saved = tmp_path / "saved"
    (saved / "metadata").mkdir(parents=True)
    (saved / "metadata" / "part-00000").write_text(SAVED_BEFORE + "\n")
    (saved / "metadata" / "_SUCCESS").write_text("")
    loaded = ImageTransformer.load(str(saved))
    params = json.loads(SAVED_BEFORE)["paramMap"]
    assert loaded.getOperations() == params["operations"]
    assert _jvm_ops(spark, loaded.getOperations()) == json.loads(REENCODED_BEFORE)
    assert (loaded.getInputCol(), loaded.getToTensor()) == ("img", True)

    img = pattern(47, 63, seed=5)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.png").write_bytes(encode(img, ".png"))
    df = read_images(spark, str(tmp_path / "images")).withColumnRenamed("image", "img")
    row = loaded.transform(df).first()
    assert row["transformError"] is None

    # The same chain in opencv-python and numpy.
    a = cv2.resize(img, (30, 20))
    a = cv2.resize(a, (24, 16), interpolation=cv2.INTER_NEAREST)  # shorter side 16
    a = cv2.resize(a, (12, 12))
    a = a[2:12, 1:12]  # crop x=1 y=2 10x11
    a = a[1:9, 1:10]  # central 8x9
    a = cv2.cvtColor(a, cv2.COLOR_BGR2RGB)
    a = cv2.flip(cv2.flip(a, 1), 0)
    a = cv2.blur(a, (5, 3))
    a = cv2.threshold(a, 100, 200.5, cv2.THRESH_TRUNC)[1]
    a = cv2.GaussianBlur(a, (5, 5), 1.5)
    mean, std = np.float32([0.5, 0.25, 0.125]), np.float32([2, 4, 8])
    a = (a.astype(np.float32) * np.float32(1 / 255) - mean) / std
    expected = a[:, :, ::-1].transpose(2, 0, 1)  # tensor channels in BGR order
    np.testing.assert_array_equal(np.array(row["out"], dtype=np.float32).reshape(3, 8, 9), expected)
