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
_PIPELINE = "org.apache.spark.ml.Pipeline"


def _local(path: str, what: str) -> Path:
    """`path` as a path of the driver's filesystem (Databricks' ``dbfs:`` paths as their
    ``/Volumes`` and ``/dbfs`` mounts); other filesystems are refused, naming why."""
    from mmlspark._engine.files import MOUNTS

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


def _holds_stages(param: Any) -> bool:
    from mmlspark.core.wrapper import to_stage, to_stages

    return param.typeConverter in (to_stage, to_stages)


def _json_params(stage: Any, values: dict[Any, Any]) -> dict[str, Any]:
    """The params that are saved as JSON: all but those holding stages (saved as folders)."""
    return {
        param.name: value
        for param, value in values.items()
        if stage.hasParam(param.name) and not _holds_stages(param)
    }


def _save_stage(stage: Any, path: Path) -> None:
    """Saves a stage held by a param with its own writer: ours on the backend it runs on,
    Spark's with pyspark's (through the JVM or the Spark Connect server)."""
    if not hasattr(stage, "write"):
        raise NotImplementedError(f"{type(stage).__name__} {stage.uid} cannot be saved")
    stage.write().save(str(path))


def _check_writable(stage: Any) -> None:
    """Fails, with the JVM's message, where a param of `stage` holds a stage that cannot be
    saved (it is not MLWritable)."""
    from pyspark.ml.util import MLWritable

    for param, value in stage._paramMap.items():
        if not _holds_stages(param) or value is None:
            continue
        for one in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(one, MLWritable):
                raise ValueError(
                    f"{type(stage).__name__} {stage.uid}: param '{param.name}' holds "
                    f"{type(one).__name__}, which cannot be saved (it is not MLWritable)"
                )


def _load_stage(path: Path) -> Any:
    """Loads a stage a param held: this library's on the Python backend, Spark's own with
    pyspark's readers."""
    cls: Any = _stage_class(json.loads(_metadata_text(path))["class"])
    if getattr(cls, "_python_backend", False):
        return PythonStageReader(cls).load(str(path))
    # Absolute: a Spark Connect server resolves a relative path from its own folder.
    return cls.load(str(path.absolute()))


def _save_stage_params(stage: Any, folder: Path) -> None:
    """The stages held by `stage`'s params, each saved under ``params/<name>`` (several under
    ``params/<name>/<index>``), as the JVM's ``StageWriter`` lays them out."""
    for param, value in stage._paramMap.items():
        if not _holds_stages(param) or value is None:
            continue
        target = folder / "params" / param.name
        if isinstance(value, (list, tuple)):
            for index, one in enumerate(value):
                _save_stage(one, target / str(index))
        else:
            _save_stage(value, target)


def _load_stage_params(stage: Any, folder: Path) -> None:
    """Sets the params of `stage` that hold stages from ``params/<name>``, where saved."""
    from mmlspark.core.wrapper import to_stages

    for param in stage.params:
        target = folder / "params" / param.name
        if not _holds_stages(param) or not target.is_dir():
            continue
        if param.typeConverter is to_stages:
            count = sum(1 for p in target.iterdir() if p.is_dir())
            stage._set(**{param.name: [_load_stage(target / str(i)) for i in range(count)]})
        else:
            stage._set(**{param.name: _load_stage(target)})


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
        # Absolute: the stages a param holds may be written by a Spark Connect server.
        folder = _local(path, what).absolute()
        _check_writable(stage)  # before anything is written
        _prepare(folder, self.shouldOverwrite, what)
        _write_metadata(
            folder,
            stage._java_class_name,
            stage.uid,
            _json_params(stage, stage._paramMap),
            _json_params(stage, stage._defaultParamMap),
        )
        if hasattr(stage, "_model_bytes"):
            has_model = (
                stage.getModelPayload() is not None or stage._spec().modelLocation is not None
            )
            (folder / _MODEL_FILE).write_bytes(stage._model_bytes() if has_model else b"")
        _save_stage_params(stage, folder)
        if hasattr(stage, "_save_data"):
            stage._save_data(str(folder))

    def saveImpl(self, path: str) -> None:
        self.save(path)


class PythonStageReader(MLReader[Any]):
    """Loads a stage saved by either backend onto the Python backend."""

    def __init__(self, clazz: type) -> None:
        super().__init__()
        self._clazz = clazz

    def load(self, path: str) -> Any:
        from mmlspark.core.wrapper import on_python_backend

        folder = _local(path, f"loading a {self._clazz.__name__}").absolute()
        metadata = json.loads(_metadata_text(folder))
        expected = self._clazz._java_class_name  # type: ignore[attr-defined]
        # A stage that moved to another package loads from what was saved under its old name.
        former = getattr(self._clazz, "_former_java_class_names", ())
        if metadata.get("class") != expected and metadata.get("class") not in former:
            raise ValueError(
                f"the stage saved at '{path}' is a {metadata.get('class')}, not a {expected}"
            )
        stage = on_python_backend(self._clazz)
        stage._resetUid(metadata["uid"])
        for name, value in metadata.get("defaultParamMap", {}).items():
            if stage.hasParam(name):
                stage._setDefault(**{name: value})
        values = {k: v for k, v in metadata.get("paramMap", {}).items() if stage.hasParam(k)}
        stage._set(**values)
        _load_stage_params(stage, folder)
        if hasattr(stage, "_load_data"):
            stage._load_data(str(folder))
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
                stage._load_model_file(data, str(folder), str(model))
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
    """Saves a ``PipelineModel`` (or a ``Pipeline``) in Spark's layout, each stage with its own
    writer, so that stages of the Python backend (which pyspark's writer cannot save) are saved
    too. The result loads with :func:`load_pipeline` on either backend, and with
    ``PipelineModel.load`` (``Pipeline.load``) on a session with the jar."""
    from pyspark.ml import Pipeline

    # Absolute: a Spark Connect server resolves a relative path from its own folder.
    folder = _local(path, "saving a PipelineModel").absolute()
    _prepare(folder, overwrite, "saving a PipelineModel")
    estimator = isinstance(model, Pipeline)
    stages = list(model.getStages() if estimator else model.stages)
    uids = [s.uid for s in stages]
    kind = _PIPELINE if estimator else _PIPELINE_MODEL
    _write_metadata(folder, kind, model.uid, {"stageUids": uids}, {})
    for i, stage in enumerate(stages):
        target = folder / "stages" / _stage_folder(i, len(stages), stage.uid)
        stage.write().save(str(target))


def load_pipeline(path: str) -> Any:
    """Loads a ``PipelineModel`` (or a ``Pipeline``) saved by either backend (``save`` with the
    jar, or :func:`save_pipeline`): the stages of this library on the backend the session runs
    them on, Spark's own with their own readers."""
    from pyspark.ml import Pipeline, PipelineModel

    from mmlspark.core.backend import backend_decision

    metadata = read_metadata(path)
    kind = metadata.get("class")
    if kind not in (_PIPELINE_MODEL, _PIPELINE):
        raise ValueError(f"'{path}' holds a {kind}, not a Pipeline or PipelineModel")
    if backend_decision().backend == "jvm":
        return (Pipeline if kind == _PIPELINE else PipelineModel).load(path)
    folder = _local(path, "loading a PipelineModel").absolute()
    uids = metadata["paramMap"]["stageUids"]
    stages = []
    for i, uid in enumerate(uids):
        stage_path = folder / "stages" / _stage_folder(i, len(uids), uid)
        cls: Any = _stage_class(json.loads(_metadata_text(stage_path))["class"])
        stages.append(cls.load(str(stage_path)))
    loaded = Pipeline(stages=stages) if kind == _PIPELINE else PipelineModel(stages)
    loaded._resetUid(metadata["uid"])
    return loaded


class _PipelineWriter(MLWriter):
    """pyspark's ``Pipeline``/``PipelineModel`` writer where a stage runs on the Python backend
    of a classic session: :func:`save_pipeline` (pyspark's own asks each stage for its JVM
    object, which such a stage has not)."""

    def __init__(self, instance: Any) -> None:
        super().__init__()
        self._instance = instance

    def save(self, path: str) -> None:
        save_pipeline(self._instance, path, overwrite=self.shouldOverwrite)

    def saveImpl(self, path: str) -> None:
        self.save(path)


class _PipelineReader(MLReader[Any]):
    """pyspark's ``Pipeline``/``PipelineModel`` reader on a classic session whose stages run on
    the Python backend: a pipeline holding this library's stages is read by
    :func:`load_pipeline` (pyspark's own would build them in a JVM that has not their classes);
    any other, or one off the driver's filesystem, by pyspark's own reader."""

    def __init__(self, clazz: type, own: Any) -> None:
        super().__init__()
        self._clazz = clazz
        self._own = own

    def load(self, path: str) -> Any:
        if not _holds_our_stages(path):
            return self._own.load(path)
        loaded = load_pipeline(path)
        if not isinstance(loaded, self._clazz):
            raise ValueError(
                f"'{path}' holds a {type(loaded).__name__}, not a {self._clazz.__name__}"
            )
        return loaded


def _holds_our_stages(path: str) -> bool:
    """Whether the pipeline saved at `path`, a path of the driver's filesystem, holds a stage
    of this library (False for any other path)."""
    try:
        folder = _local(path, "loading a PipelineModel")
        stages = sorted((folder / "stages").iterdir()) if (folder / "stages").is_dir() else []
        kinds = [json.loads(_metadata_text(stage)).get("class", "") for stage in stages]
    except (ValueError, OSError, NotImplementedError):
        return False
    return any(not kind.startswith("org.apache.spark.") for kind in kinds)


def _on_python(stages: list[Any]) -> bool:
    from mmlspark.core.wrapper import MMLParams

    return any(isinstance(s, MMLParams) and s._on_python() for s in stages)


def install_pipeline_persistence() -> None:
    """Makes ``Pipeline``'s and ``PipelineModel``'s own ``save``/``write`` and ``load``/``read``
    work on a classic session without the jar (on Spark Connect and with the jar they already
    do, and are left as they are): a pipeline holding a stage of the Python backend is written by
    :func:`save_pipeline`, and read by :func:`load_pipeline` where the session runs this
    library's stages on the Python backend."""
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.sql.utils import is_remote

    if getattr(Pipeline, "_mmlspark_persistence", False):
        return

    def writer(original: Any, stages: Any) -> Any:
        def write(self: Any) -> Any:
            if not is_remote() and _on_python(list(stages(self) or [])):
                return _PipelineWriter(self)
            return original(self)

        write.__doc__ = original.__doc__
        return write

    def reader(cls: Any, original: Any) -> Any:
        def read(klass: Any) -> Any:
            from mmlspark.core.backend import backend_decision

            own = original.__get__(None, klass)()
            if not is_remote() and backend_decision().backend == "python":
                return _PipelineReader(klass, own)
            return own

        read.__doc__ = original.__doc__
        return classmethod(read)

    Pipeline.write = writer(Pipeline.write, lambda p: p.getStages())  # type: ignore[method-assign]
    PipelineModel.write = writer(PipelineModel.write, lambda m: m.stages)  # type: ignore[method-assign]
    Pipeline.read = reader(Pipeline, Pipeline.__dict__["read"])  # type: ignore[method-assign]
    PipelineModel.read = reader(PipelineModel, PipelineModel.__dict__["read"])  # type: ignore[method-assign]
    Pipeline._mmlspark_persistence = True  # type: ignore[attr-defined]
