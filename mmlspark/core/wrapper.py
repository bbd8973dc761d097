"""Base classes of the generated wrappers.

Each generated class declares ``_java_class_name``, the JVM class it wraps; everything here
reads that declaration instead of deriving names from Python modules, so pyspark itself is
never patched.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from py4j.java_gateway import JavaObject
from py4j.protocol import Py4JJavaError
from pyspark import SparkContext
from pyspark.errors import IllegalArgumentException
from pyspark.ml.evaluation import JavaEvaluator
from pyspark.ml.param import Param
from pyspark.ml.util import JavaMLReadable, JavaMLReader, JavaMLWritable, MLReader
from pyspark.ml.wrapper import JavaEstimator, JavaModel, JavaParams, JavaTransformer
from pyspark.sql.utils import is_remote

from mmlspark.core.compat import (
    PYSPARK_LINE,
    connect_ml_supported,
    is_remote_model_ref,
    remote_model_ref,
)

__all__ = [
    "ConnectNotSupportedError",
    "require_classic_session",
    "require_java_obj",
    "MMLParams",
    "MMLTransformer",
    "MMLEstimator",
    "MMLModel",
    "MMLEvaluator",
    "on_python_backend",
    "to_stage",
    "to_stages",
]


class ConnectNotSupportedError(NotImplementedError):
    """What needs the driver's JVM (py4j), which a Spark Connect client does not have."""


def require_classic_session(feature: str, instead: str) -> None:
    """Raises :class:`ConnectNotSupportedError` naming `feature` and what to do `instead` when
    the active session is a Spark Connect one."""
    if is_remote():
        raise ConnectNotSupportedError(
            f"{feature} needs a classic Spark session (the driver's JVM through py4j) and does not "
            f"work over Spark Connect; {instead}"
        )


def require_java_obj(stage: Any, feature: str, instead: str) -> JavaObject:
    """The JVM object behind ``stage``, for a method that calls it directly: fails with
    :class:`ConnectNotSupportedError` on a Spark Connect session (naming `feature` and what to do
    `instead`) and with a clear error where the stage has no JVM object."""
    require_classic_session(feature, instead)
    java_obj = getattr(stage, "_java_obj", None)
    if not isinstance(java_obj, JavaObject):
        raise RuntimeError(
            f"{feature}: {stage.uid} has no JVM stage (it was not fitted or loaded, or no session "
            "was running when it was made; start one with mmlspark.session())"
        )
    return java_obj


def _python_class(java_class_name: str) -> type:
    """The Python class of a JVM stage of this library: the same module path and name."""
    module, _, name = java_class_name.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def to_stage(value: Any) -> JavaParams:
    """Type converter for params that hold a pipeline stage (a meta-estimator's inner stage):
    a JVM-backed stage, or a Pipeline/PipelineModel of them; on the Python backend of a stage
    that has one (Timer), any pyspark Transformer or Estimator."""
    if isinstance(value, JavaParams) or _is_jvm_convertible(value):
        return value
    if isinstance(value, JavaObject):
        return JavaParams._from_java(value)
    if _is_python_stage(value):
        return value  # type: ignore[no-any-return]
    raise TypeError(
        f"expected a JVM-backed pipeline stage (a JavaParams), got {type(value).__name__}"
    )


def to_stages(value: Any) -> list[JavaParams]:
    """Type converter for params that hold several stages (a model selector's candidates): a
    list of stages, or the JVM array of them that py4j hands back."""
    if isinstance(value, (JavaParams, JavaObject)) and not hasattr(value, "__len__"):
        raise TypeError("expected a list of pipeline stages, got a single stage")
    try:
        stages = list(value)
    except TypeError:
        raise TypeError(f"expected a list of pipeline stages, got {type(value).__name__}") from None
    return [to_stage(v) for v in stages]


def _is_jvm_convertible(value: Any) -> bool:
    """A Python stage that builds its JVM twin itself (pyspark's Pipeline and PipelineModel)."""
    # py4j's JavaObject answers every attribute, so it is ruled out first.
    return (
        not isinstance(value, JavaObject) and hasattr(value, "_to_java") and hasattr(value, "uid")
    )


def _is_python_stage(value: Any) -> bool:
    """A pyspark Transformer or Estimator without a JVM twin (written in Python)."""
    from pyspark.ml.base import Estimator, Transformer

    return isinstance(value, (Transformer, Estimator)) and not (
        isinstance(value, JavaParams) or _is_jvm_convertible(value)
    )


def _require_jvm_stages(stage: Any, name: str, value: Any) -> None:
    """A JVM stage's stage-valued param `name` takes JVM-backed stages only."""
    for v in value if isinstance(value, list) else [value]:
        if _is_python_stage(v):
            instead = (
                f"run {type(stage).__name__} on the Python backend (setBackend('python')), or "
                if getattr(stage, "_python_backend", False)
                else ""
            )
            raise TypeError(
                f"{type(stage).__name__}.{name}: {type(v).__name__} is a stage written in Python, "
                f"which the JVM backend cannot run; {instead}give it a JVM-backed stage"
            )


def _stage_param_names(cls: type) -> list[str]:
    """The names of the params of the stage class `cls` that hold pipeline stages."""
    names = {
        value.name
        for klass in cls.__mro__
        for value in vars(klass).values()
        if isinstance(value, Param) and value.typeConverter in (to_stage, to_stages)
    }
    return sorted(names)


class _Reader(JavaMLReader):
    """Loads a stage through the JVM class its Python class declares."""

    @classmethod
    def _java_loader_class(cls, clazz: type) -> str:
        return clazz._java_class_name  # type: ignore[attr-defined]


class _RemoteReader(MLReader[Any]):
    """Loads a stage on a Spark Connect server through the JVM class its Python class declares
    (pyspark's own remote reader derives the JVM name from the Python module, which only works
    for pyspark's classes)."""

    def __init__(self, clazz: type[MMLParams]) -> None:
        super().__init__()
        self._clazz = clazz

    def load(self, path: str) -> Any:
        import pyspark.sql.connect.proto as pb2
        from pyspark.ml.connect.serialize import deserialize, deserialize_param
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        holding = _stage_param_names(self._clazz)
        if holding:
            # The server answers a Read with every param's value, and it cannot send a stage.
            raise ConnectNotSupportedError(
                f"loading a {self._clazz.__name__} over Spark Connect: its params "
                f"({', '.join(holding)}) hold pipeline stages, which a Spark Connect ML server "
                "cannot send to a client; load and run it on a classic session "
                "(mmlspark.session() or mmlspark.spark_conf())"
            )
        session = ConnectSession.getActiveSession()
        assert session is not None
        is_model = issubclass(self._clazz, JavaModel)
        if is_model:
            kind = pb2.MlOperator.OPERATOR_TYPE_MODEL
        elif issubclass(self._clazz, JavaEstimator):
            kind = pb2.MlOperator.OPERATOR_TYPE_ESTIMATOR
        elif issubclass(self._clazz, JavaEvaluator):
            kind = pb2.MlOperator.OPERATOR_TYPE_EVALUATOR
        else:
            kind = pb2.MlOperator.OPERATOR_TYPE_TRANSFORMER
        command = pb2.Command()
        command.ml_command.read.CopyFrom(
            pb2.MlCommand.Read(
                operator=pb2.MlOperator(name=self._clazz._java_class_name, type=kind), path=path
            )
        )
        _, properties, _ = session.client.execute_command(command)
        result = deserialize(properties)
        instance = self._clazz()
        if is_model:
            instance._java_obj = remote_model_ref(session, result.obj_ref.id)
        instance._resetUid(result.uid)
        # Params holding stages stay on the server: the client cannot hold them.
        values = {
            k: deserialize_param(v)
            for k, v in result.params.params.items()
            if instance.hasParam(k)
            and instance.getParam(k).typeConverter not in (to_stage, to_stages)
        }
        instance._set(**values)
        return instance


class MMLParams(JavaParams, JavaMLReadable, JavaMLWritable):
    """A Python stage backed by a JVM stage of the mmlspark jar."""

    _java_class_name: ClassVar[str]
    _input_kwargs: dict[str, Any]
    # Whether the stage also runs on the Python backend (mmlspark.core.backend).
    _python_backend: ClassVar[bool] = False
    # The JVM params' validators (mmlspark.core.validators), by param name: the generated wrappers
    # hold those of the param tables (mmlspark.contracts.Check).
    _python_param_checks: ClassVar[Mapping[str, Callable[[Any], bool]]] = {}
    # Made on the Python backend whatever the backend setting (on_python_backend).
    _made_on_python: bool = False

    def __init__(self) -> None:
        super().__init__()
        self._backend = self._chosen_backend(None)
        if self._backend == "python":
            self._java_obj = None
        else:
            self._java_obj = self._new_jvm_stage()

    def _chosen_backend(self, setting: str | None) -> str:
        from mmlspark.core.backend import backend_decision, get_backend

        if setting is None and self._made_on_python:
            return "python"
        if (setting or get_backend()) == "jvm":
            return "jvm"
        decision = backend_decision(setting=setting)
        if decision.backend == "python" and not self._python_backend:
            if (setting or get_backend()) == "python":
                raise NotImplementedError(
                    f"{type(self).__name__} runs on the JVM backend only (it has no Python "
                    "backend yet); use a session with the mmlspark jar (mmlspark.session() or "
                    "mmlspark.spark_conf())"
                )
            return "jvm"  # the JVM path below says what the session lacks
        return decision.backend

    def setBackend(self, name: str) -> Any:
        """Runs this stage on ``"jvm"`` (the mmlspark jar), ``"python"`` (onnxruntime and OpenCV
        in Arrow UDFs, no jar) or ``"auto"`` (the JVM when the session has the jar), whatever
        :func:`mmlspark.set_backend` says. Params set so far are kept."""
        backend = self._chosen_backend(name)
        if backend == self._backend:
            return self
        previous = self._backend, self._java_obj
        self._backend = backend
        if backend == "python":
            self._java_obj = None
            return self
        try:
            self._java_obj = self._new_jvm_stage()
            if not is_remote():
                self._transfer_params_to_java()
        except Exception:
            # A value the JVM stage cannot take (a stage written in Python): nothing changes.
            self._backend, self._java_obj = previous
            raise
        return self

    def getBackend(self) -> str:
        """The backend this stage runs on: ``"jvm"`` or ``"python"``."""
        return self._backend

    def _frozen(self, param: Param[Any]) -> Any:
        """The value of `param` as a frozen spec (``_spec()``) holds it: the set value, else the
        default, else None; a list as a tuple."""
        if not self.isDefined(param):
            return None
        value = self.getOrDefault(param)
        return tuple(value) if isinstance(value, list) else value

    def _on_python(self) -> bool:
        """Whether this stage runs on the Python backend (a stage given a JVM object, as
        pyspark's loaders do, runs on the JVM)."""
        return getattr(self, "_backend", "jvm") == "python" and self._java_obj is None

    def write(self) -> Any:
        """Returns a writer that saves this stage in the JVM stage's format, on either backend
        (on the Python backend, to a path of the driver's filesystem)."""
        if self._on_python():
            from mmlspark.core.persistence import PythonStageWriter

            return PythonStageWriter(self)
        return super().write()

    def _new_jvm_stage(self) -> Any:
        from mmlspark.core.session import require_jvm_library

        if not is_remote():
            require_jvm_library(SparkContext._active_spark_context)
        elif not connect_ml_supported():
            raise ConnectNotSupportedError(
                f"{type(self).__name__} over Spark Connect needs Spark 4.0 or newer: the Connect "
                f"server of Spark {'.'.join(map(str, PYSPARK_LINE))} runs no ML stages; use a "
                "classic session (mmlspark.session() or mmlspark.spark_conf())"
            )
        return self._new_java_obj(self._java_class_name, self.uid)

    @classmethod
    def read(cls) -> Any:
        """Returns a reader that loads this stage from a path (on a classic or a Spark Connect
        session; onto the Python backend where the session runs stages there)."""
        if cls._python_backend:
            from mmlspark.core.backend import backend_decision

            if backend_decision().backend == "python":
                from mmlspark.core.persistence import PythonStageReader

                return PythonStageReader(cls)
        if is_remote():
            return _RemoteReader(cls)
        return _Reader(cls)

    def _make_java_param_pair(self, param: Param[Any], value: Any) -> JavaObject:
        if param.typeConverter in (to_stage, to_stages):
            _require_jvm_stages(self, param.name, value)
        if isinstance(value, list) and value and self._java_obj:
            if all(isinstance(v, JavaParams) or _is_jvm_convertible(v) for v in value):
                java_param = self._java_obj.getParam(self._resolveParam(param).name)
                gateway = SparkContext._gateway
                assert gateway is not None
                stages = gateway.new_array(
                    gateway.jvm.org.apache.spark.ml.PipelineStage, len(value)
                )
                for i, v in enumerate(value):
                    stages[i] = v._to_java()
                return java_param.w(stages)
        if (isinstance(value, JavaParams) or _is_jvm_convertible(value)) and self._java_obj:
            java_param = self._java_obj.getParam(self._resolveParam(param).name)
            return java_param.w(value._to_java())
        if isinstance(value, int) and not isinstance(value, bool) and self._java_obj:
            java_param = self._java_obj.getParam(self._resolveParam(param).name)
            if java_param.getClass().getName() == "org.apache.spark.ml.param.LongParam":
                from mmlspark.core.jvm import long_param_pair

                return long_param_pair(java_param, value)
        return super()._make_java_param_pair(param, value)

    def _set(self, **kwargs: Any) -> Any:
        """Sets params, validating each against the JVM stage's own rule when a JVM is at hand,
        so that a bad value fails here rather than later on an executor."""
        java_obj = getattr(self, "_java_obj", None)
        for name, value in kwargs.items():
            converter = self.getParam(name).typeConverter
            # On the Python backend the stages held are pyspark's own, which run over Connect.
            if value is not None and converter in (to_stage, to_stages) and not self._on_python():
                require_classic_session(
                    f"{type(self).__name__}.{name} (a param holding pipeline stages)",
                    "set it, fit and run the stage on a classic session",
                )
                if isinstance(java_obj, JavaObject):
                    # The value as given: converting a JVM object here would make a second
                    # wrapper of it, whose finalizer detaches it from the gateway.
                    _require_jvm_stages(self, name, value)
        previous = {name: self._paramMap.get(self.getParam(name)) for name in kwargs}
        if not isinstance(java_obj, JavaObject):
            self._check_without_jvm(kwargs)
            super()._set(**kwargs)
            return self
        super()._set(**kwargs)
        for name in kwargs:
            param = self.getParam(name)
            if param not in self._paramMap:
                continue
            value = self._paramMap[param]
            try:
                java_obj.set(self._make_java_param_pair(param, value))
            except (Py4JJavaError, IllegalArgumentException) as error:
                for key, old in previous.items():
                    if old is None:
                        self._paramMap.pop(self.getParam(key), None)
                    else:
                        self._paramMap[self.getParam(key)] = old
                reason = (
                    error.java_exception.getMessage()
                    if isinstance(error, Py4JJavaError)
                    else str(error)
                )
                raise ValueError(
                    f"{type(self).__name__}: invalid value {value!r} for param '{name}' "
                    f"({param.doc}): {reason}"
                ) from None
        return self

    def _check_without_jvm(self, values: dict[str, Any]) -> None:
        """Where no JVM stage checks values at set time (the Python backend, Spark Connect):
        each value against the JVM param's validator, failing as the JVM stage does."""
        for name, value in values.items():
            check = self._python_param_checks.get(name)
            if value is None or check is None:
                continue
            param = self.getParam(name)
            converted = param.typeConverter(value)
            if not check(converted):
                shown = _jvm_string(converted)
                reason = f"{self.uid} parameter {name} given invalid value {shown}."
                raise ValueError(
                    f"{type(self).__name__}: invalid value {converted!r} for param '{name}' "
                    f"({param.doc}): {reason}"
                )


def _jvm_string(value: Any) -> str:
    """`value` as the JVM's validation message prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_jvm_string(v) for v in value) + "]"
    return str(value)


def on_python_backend(cls: Any, **params: Any) -> Any:
    """A new stage of `cls` (a class with a Python backend) on the Python backend whatever the
    backend setting, with `params` set: no JVM stage is made."""
    stage = cls.__new__(cls)
    stage._made_on_python = True
    stage.__init__(**params)
    return stage


class _TransformsOnPython(MMLParams):
    """The transform of a stage that may run on the Python backend: there, its
    ``_python_transform``; otherwise the JVM stage's."""

    def _transform(self, dataset: Any) -> Any:
        if self._on_python():
            return self._python_transform(dataset)
        return super()._transform(dataset)  # type: ignore[misc]

    def _python_transform(self, dataset: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no Python backend")


class MMLTransformer(_TransformsOnPython, JavaTransformer):
    """A JVM-backed Transformer, which may also run on the Python backend."""


class MMLModel(_TransformsOnPython, JavaModel):
    """A JVM-backed Model, which may also run on the Python backend."""


class MMLEstimator(MMLParams, JavaEstimator):
    """A JVM-backed Estimator; the model it fits is wrapped in its own Python class."""

    _java_model_class_name: ClassVar[str]

    def _create_model(self, java_model: Any) -> JavaModel:
        if is_remote_model_ref(java_model):  # fitted on a Spark Connect server
            model = _python_class(self._java_model_class_name)()
            model._java_obj = java_model
            return model  # type: ignore[no-any-return]
        return JavaParams._from_java(java_model)

    def _copyValues(self, to: Any, extra: Any = None) -> Any:
        """pyspark copies an estimator's params onto the model it fits; a stage-valued param
        must keep the model's own value (the fitted inner model, not the inner estimator)."""
        java_model = getattr(to, "_java_obj", None)
        if not (isinstance(to, JavaModel) and isinstance(java_model, JavaObject)):
            return super()._copyValues(to, extra)
        fitted = {}
        for param in to.params:
            if param.typeConverter is to_stage:
                java_param = java_model.getParam(param.name)
                if java_model.isDefined(java_param):
                    fitted[param] = (java_param, java_model.getOrDefault(java_param))
        result = super()._copyValues(to, extra)
        for param, (java_param, value) in fitted.items():
            java_model.set(java_param, value)
            to._paramMap[param] = to_stage(value)
        return result


class MMLEvaluator(MMLParams, JavaEvaluator):
    """A JVM-backed Evaluator."""
