"""Saving and loading the stages that hold Python functions (UDFTransformer, Lambda).

Such a stage has no JVM form: a JVM stage cannot hold a Python function in a param that Spark
Connect carries, nor run one without a Python worker. It is saved in Spark ML's layout
(``metadata/`` with its class, uid and JSON params, so that ``Pipeline`` and ``PipelineModel``
save and load it beside any other stage) plus ``functions.pkl``: its functions pickled with
cloudpickle, as pyspark pickles a UDF to ship it to the executors. Like any pickle, loading one
runs code it holds: load only stages you trust. A pickle loads in the Python (major.minor) it was
written by; another one is refused, naming both. The files are written by the driver's Python
process: local paths and the mounts that look like them, as the Python backend saves (a relative
path from the JVM's working folder on a classic session, as Spark's writers take it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pyspark import cloudpickle
from pyspark.ml.param import Param, Params
from pyspark.ml.util import MLReadable, MLReader, MLWritable, MLWriter
from pyspark.sql.utils import is_remote

from mmlspark.core.jvm import jvm_working_folder
from mmlspark.core.persistence import _local, _prepare, _write_metadata, read_metadata

__all__ = ["FunctionStage", "function_param"]

_FUNCTIONS_FILE = "functions.pkl"
_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _folder(path: str, what: str) -> Path:
    """`path` as the folder Spark's own writers would use: a relative path is taken from the
    JVM's working folder on a classic session (where pyspark's Pipeline writer puts the
    pipeline's metadata, whatever the Python process's folder is now), else from Python's."""
    folder = _local(path, what)
    if not folder.is_absolute() and not is_remote():
        working = jvm_working_folder()
        if working is not None:
            return Path(working) / folder
    return folder.absolute()


def function_param(name: str, doc: str) -> Param[Any]:
    """A param that holds a Python object (a function, a UDF): saved in ``functions.pkl``."""
    return Param(Params._dummy(), name, doc)


class FunctionStage(Params, MLReadable[Any], MLWritable):
    """Persistence of a Python-only stage; ``_function_params`` names its function-valued
    params, ``_java_class_name`` the class name its metadata records (the module exporting it)."""

    _java_class_name: str
    _function_params: tuple[str, ...] = ()
    _input_kwargs: dict[str, Any]

    def write(self) -> MLWriter:
        return _FunctionStageWriter(self)

    @classmethod
    def read(cls) -> MLReader[Any]:
        return _FunctionStageReader(cls)


class _FunctionStageWriter(MLWriter):
    def __init__(self, stage: FunctionStage) -> None:
        super().__init__()
        self._stage = stage

    def save(self, path: str) -> None:
        """Saves under `path`, a path of the driver's filesystem."""
        stage = self._stage
        what = f"saving {type(stage).__name__} {stage.uid}"
        folder = _folder(path, what)
        functions = {
            name: stage.getOrDefault(name)
            for name in stage._function_params
            if stage.isDefined(stage.getParam(name))
        }
        try:
            payload = cloudpickle.dumps({"python": _PYTHON, "functions": functions})
        except Exception as error:  # what cloudpickle cannot pickle: a lock, a socket, ...
            raise ValueError(
                f"{type(stage).__name__} {stage.uid}: its function cannot be saved: cloudpickle "
                f"cannot pickle it ({type(error).__name__}: {error}); save the stage without it "
                "and set the function again after loading"
            ) from None

        def plain(values: dict[Any, Any]) -> dict[str, Any]:
            return {p.name: v for p, v in values.items() if p.name not in stage._function_params}

        _prepare(folder, self.shouldOverwrite, what)
        _write_metadata(
            folder,
            stage._java_class_name,
            stage.uid,
            plain(stage._paramMap),
            plain(stage._defaultParamMap),
        )
        (folder / _FUNCTIONS_FILE).write_bytes(payload)

    def saveImpl(self, path: str) -> None:
        self.save(path)


class _FunctionStageReader(MLReader[Any]):
    def __init__(self, clazz: type[FunctionStage]) -> None:
        super().__init__()
        self._clazz = clazz

    def load(self, path: str) -> Any:
        cls = self._clazz
        folder = _folder(path, f"loading a {cls.__name__}")
        metadata = read_metadata(str(folder))
        if metadata.get("class") != cls._java_class_name:
            raise ValueError(
                f"the stage saved at '{path}' is a {metadata.get('class')}, "
                f"not a {cls._java_class_name}"
            )
        stage = cls()
        stage._resetUid(metadata["uid"])
        for name, value in metadata.get("defaultParamMap", {}).items():
            if stage.hasParam(name):
                stage._setDefault(**{name: value})
        stage._set(**{k: v for k, v in metadata.get("paramMap", {}).items() if stage.hasParam(k)})
        data = (folder / _FUNCTIONS_FILE).read_bytes()
        try:
            saved = cloudpickle.loads(data)
        except Exception as error:
            raise ValueError(
                f"{cls.__name__} {stage.uid}: cannot load the function saved at '{path}' in "
                f"Python {_PYTHON} ({type(error).__name__}: {error}); a saved Python function "
                "loads in the Python it was saved by, with the modules it uses installed"
            ) from None
        if saved["python"] != _PYTHON:
            raise ValueError(
                f"{cls.__name__} {stage.uid}: the function saved at '{path}' was pickled by "
                f"Python {saved['python']} and this is Python {_PYTHON}; load it in Python "
                f"{saved['python']}, or set the function again"
            )
        stage._set(**saved["functions"])
        return stage
