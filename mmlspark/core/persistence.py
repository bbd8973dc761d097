"""Saving and loading stages of the Python backend, in the JVM stages' format.

A stage saved by either backend loads on either: the layout is Spark ML's (``metadata/`` holding
one JSON line with the JVM class, uid, set params and defaults), plus ``model.onnx`` for the stages
that hold a model. On the Python backend there is no JVM to write through, so the files are
written and read by the driver's Python process: local paths, and the mounts that look like them
(``/dbfs``, ``/Volumes`` on Databricks). Pipelines go through :func:`save_pipeline` and
:func:`load_pipeline`, which write and read Spark's ``PipelineModel`` layout, each stage with its
own writer and reader.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from pyspark.ml.util import MLReader, MLWriter

__all__ = ["save_pipeline", "load_pipeline"]

_MODEL_FILE = "model.onnx"
_PIPELINE_MODEL = "org.apache.spark.ml.PipelineModel"


def _local(path: str, what: str) -> Path:
    """`path` as a path of the driver's filesystem (Databricks' ``dbfs:`` paths as their
    ``/Volumes`` and ``/dbfs`` mounts); other filesystems are refused, naming why."""
    from mmlspark.opencv._cv import MOUNTS

    if path.startswith("file:"):
        return Path("/" + path.removeprefix("file:").lstrip("/"))
    for prefix, mount in MOUNTS.items():
        if path.startswith(prefix):
            return Path(mount + path[len(prefix) :])
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path):
        raise NotImplementedError(
            f"{what}: the Python backend saves and loads through the driver's own filesystem "
            f"(local paths, /dbfs and /Volumes mounts, dbfs: paths), not '{path}'; use a local or "
            "mounted path, or a session with the mmlspark jar"
        )
    return Path(path)


def _metadata_text(folder: Path) -> str:
    """The JSON line Spark's writers put in ``metadata/part-00000`` (or a part file of any name)."""
    meta = folder / "metadata"
    parts = (
        sorted(p for p in meta.glob("part-*") if p.is_file() and not p.name.endswith(".crc"))
        if meta.is_dir()
        else []
    )
    for part in parts:
        text = part.read_text(encoding="utf-8").strip()
        if text:
            return text.splitlines()[0]
    raise FileNotFoundError(f"no stage is saved at '{folder}' (no metadata/part-* file)")


def read_metadata(path: str) -> dict[str, Any]:
    """The metadata of the stage saved at `path`."""
    return json.loads(_metadata_text(_local(path, "loading a stage")))  # type: ignore[no-any-return]


def _spark_version() -> str:
    import pyspark

    return pyspark.__version__


def _write_metadata(
    folder: Path, cls: str, uid: str, params: dict[str, Any], defaults: dict[str, Any]
) -> None:
    meta = folder / "metadata"
    meta.mkdir(parents=True)
    line = json.dumps(
        {
            "class": cls,
            "timestamp": int(time.time() * 1000),
            "sparkVersion": _spark_version(),
            "uid": uid,
            "paramMap": params,
            "defaultParamMap": defaults,
        },
        separators=(",", ":"),
    )
    (meta / "part-00000").write_text(line + "\n", encoding="utf-8")
    (meta / "_SUCCESS").write_bytes(b"")


def _prepare(folder: Path, overwrite: bool, what: str) -> None:
    if folder.exists():
        if not overwrite:
            raise FileExistsError(
                f"{what}: '{folder}' already exists; use write().overwrite().save(path)"
            )
        shutil.rmtree(folder)


def _json_params(stage: Any, values: dict[Any, Any]) -> dict[str, Any]:
    return {param.name: value for param, value in values.items() if stage.hasParam(param.name)}


class PythonStageWriter(MLWriter):
    """Writes a stage of the Python backend as its JVM class would: metadata, and the model."""

    def __init__(self, stage: Any) -> None:
        super().__init__()
        self._stage = stage

    def save(self, path: str) -> None:
        """Saves the stage under `path`, a path of the driver's filesystem (pyspark's own save
        asks the JVM to clear the folder, which a session without it cannot)."""
        stage = self._stage
        what = f"saving {type(stage).__name__} {stage.uid}"
        folder = _local(path, what)
        _prepare(folder, self.shouldOverwrite, what)
        _write_metadata(
            folder,
            stage._java_class_name,
            stage.uid,
            _json_params(stage, stage._paramMap),
            _json_params(stage, stage._defaultParamMap),
        )
        if hasattr(stage, "_model_bytes"):
            has_model = stage.getModelPayload() is not None or stage.isDefined("modelLocation")
            (folder / _MODEL_FILE).write_bytes(stage._model_bytes() if has_model else b"")

    def saveImpl(self, path: str) -> None:
        self.save(path)


class PythonStageReader(MLReader[Any]):
    """Loads a stage saved by either backend onto the Python backend."""

    def __init__(self, clazz: type) -> None:
        super().__init__()
        self._clazz = clazz

    def load(self, path: str) -> Any:
        folder = _local(path, f"loading a {self._clazz.__name__}")
        metadata = json.loads(_metadata_text(folder))
        expected = self._clazz._java_class_name  # type: ignore[attr-defined]
        if metadata.get("class") != expected:
            raise ValueError(
                f"the stage saved at '{path}' is a {metadata.get('class')}, not a {expected}"
            )
        stage = self._clazz().setBackend("python")
        stage._resetUid(metadata["uid"])
        for name, value in metadata.get("defaultParamMap", {}).items():
            if stage.hasParam(name):
                stage._setDefault(**{name: value})
        values = {k: v for k, v in metadata.get("paramMap", {}).items() if stage.hasParam(k)}
        stage._set(**values)
        model = folder / _MODEL_FILE
        if hasattr(stage, "_model_bytes"):
            if not model.is_file():
                raise ValueError(
                    f"{type(stage).__name__} {stage.uid}: cannot load the stage saved at '{path}': "
                    f"its model file '{model}' is missing (a saved stage runs only the model saved "
                    "with it)"
                )
            data = model.read_bytes()
            if data:
                from mmlspark.onnx.model_payload import with_external_data

                # A JVM save of a model with external data holds its files beside model.onnx.
                stage._python_payload = with_external_data(stage, data, str(folder), str(model))
        return stage


def _stage_class(java_class: str) -> type:
    """The Python class of a saved stage's JVM class: ours, or pyspark's."""
    import importlib

    if java_class.startswith("org.apache.spark."):
        module, _, name = ("pyspark." + java_class.removeprefix("org.apache.spark.")).rpartition(
            "."
        )
    else:
        module, _, name = java_class.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _stage_folder(index: int, count: int, uid: str) -> str:
    return f"{index:0{len(str(count))}d}_{uid}"


def save_pipeline(model: Any, path: str, overwrite: bool = False) -> None:
    """Saves a ``PipelineModel`` in Spark's layout, each stage with its own writer, so that
    stages of the Python backend (which pyspark's writer cannot save) are saved too. The result
    loads with :func:`load_pipeline` on either backend, and with ``PipelineModel.load`` on a
    session with the jar."""
    # Absolute: a Spark Connect server resolves a relative path from its own folder.
    folder = _local(path, "saving a PipelineModel").absolute()
    _prepare(folder, overwrite, "saving a PipelineModel")
    stages = list(model.stages)
    uids = [s.uid for s in stages]
    _write_metadata(folder, _PIPELINE_MODEL, model.uid, {"stageUids": uids}, {})
    for i, stage in enumerate(stages):
        target = folder / "stages" / _stage_folder(i, len(stages), stage.uid)
        stage.write().save(str(target))


def load_pipeline(path: str) -> Any:
    """Loads a ``PipelineModel`` saved by either backend (``PipelineModel.save`` with the jar, or
    :func:`save_pipeline`): the stages of this library on the backend the session runs them on,
    Spark's own with their own readers."""
    from pyspark.ml import PipelineModel

    from mmlspark.core.backend import backend_decision

    metadata = read_metadata(path)
    if metadata.get("class") != _PIPELINE_MODEL:
        raise ValueError(f"'{path}' holds a {metadata.get('class')}, not a PipelineModel")
    if backend_decision().backend == "jvm":
        return PipelineModel.load(path)
    folder = _local(path, "loading a PipelineModel").absolute()
    uids = metadata["paramMap"]["stageUids"]
    stages = []
    for i, uid in enumerate(uids):
        stage_path = folder / "stages" / _stage_folder(i, len(uids), uid)
        cls: Any = _stage_class(json.loads(_metadata_text(stage_path))["class"])
        stages.append(cls.load(str(stage_path)))
    loaded = PipelineModel(stages)
    loaded._resetUid(metadata["uid"])
    return loaded
