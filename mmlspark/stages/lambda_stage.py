"""Lambda: a Python function from DataFrame to DataFrame as a stage.

A Python-only stage (see ``mmlspark.stages._pickled`` for why it has no JVM form); it runs on
classic sessions, with or without the jar, and over Spark Connect, since the function only calls
the DataFrame API of the session it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from mmlspark.core.checks import fail, require
from mmlspark.stages._pickled import FunctionStage, function_param

__all__ = ["Lambda"]


class Lambda(Transformer, FunctionStage):
    """Runs a Python function on the DataFrame: ``transform(df)`` is ``f(df)``.

    ``transformSchema(schema)`` is ``transformSchemaFunc(schema)`` where that is set; otherwise it
    runs the function on an empty DataFrame of `schema` in the active session and returns the
    result's schema (only planning: no job runs, though on Spark Connect it asks the server once).
    A stage is saved with its functions pickled by cloudpickle (``functions.pkl`` beside the
    metadata); the function is called with a DataFrame of whichever session runs the stage.

    Examples
    --------
    >>> from mmlspark.stages import Lambda
    >>> evens = Lambda.apply(lambda df: df.where("id % 2 = 0"))
    >>> evens.transform(spark.range(5)).count()
    3
    """

    transformFunc: Param[Callable[[DataFrame], DataFrame]] = function_param(
        "transformFunc", "the function from DataFrame to DataFrame that transform runs"
    )
    transformSchemaFunc: Param[Callable[[T.StructType], T.StructType]] = function_param(
        "transformSchemaFunc",
        "the function from the input schema to the output schema (optional: without it "
        "transformSchema runs transformFunc on an empty DataFrame)",
    )

    _java_class_name = "mmlspark.stages.Lambda"
    _function_params = ("transformFunc", "transformSchemaFunc")

    @keyword_only
    def __init__(
        self,
        *,
        transformFunc: Callable[[DataFrame], DataFrame] | None = None,
        transformSchemaFunc: Callable[[T.StructType], T.StructType] | None = None,
    ) -> None:
        super().__init__()
        kwargs = self._input_kwargs
        if kwargs.get("transformFunc") is not None:
            self.setTransform(kwargs["transformFunc"])
        if kwargs.get("transformSchemaFunc") is not None:
            self.setTransformSchema(kwargs["transformSchemaFunc"])

    @staticmethod
    def apply(f: Callable[[DataFrame], DataFrame]) -> Lambda:
        """A Lambda that runs `f`, as SynapseML's ``Lambda.apply``."""
        return Lambda().setTransform(f)

    def _callable(self, name: str, f: Any) -> Any:
        if not callable(f):
            fail(self, f"{name} must be a function, got {type(f).__name__}")
        return f

    def setTransform(self, f: Callable[[DataFrame], DataFrame]) -> Lambda:
        """The function from DataFrame to DataFrame that ``transform`` runs."""
        return self._set(transformFunc=self._callable("transformFunc", f))  # type: ignore[no-any-return]

    def getTransform(self) -> Callable[[DataFrame], DataFrame]:
        return self.getOrDefault(self.transformFunc)  # type: ignore[no-any-return]

    def setTransformSchema(self, f: Callable[[T.StructType], T.StructType]) -> Lambda:
        """The function from input schema to output schema that ``transformSchema`` runs."""
        return self._set(  # type: ignore[no-any-return]
            transformSchemaFunc=self._callable("transformSchemaFunc", f)
        )

    def getTransformSchema(self) -> Callable[[T.StructType], T.StructType]:
        return self.getOrDefault(self.transformSchemaFunc)  # type: ignore[no-any-return]

    # pyspark's setter and getter names of the params, as SynapseML's Python Lambda has them
    setTransformFunc = setTransform
    getTransformFunc = getTransform
    setTransformSchemaFunc = setTransformSchema
    getTransformSchemaFunc = getTransformSchema

    def _run(self, dataset: DataFrame) -> DataFrame:
        require(self, self.isSet(self.transformFunc), "param 'transformFunc' must be set")
        out = self.getTransform()(dataset)
        if not isinstance(out, DataFrame):
            fail(self, f"transformFunc must return a DataFrame but returned {type(out).__name__}")
        return out

    def transformSchema(self, schema: T.StructType) -> T.StructType:
        """The output schema: ``transformSchemaFunc(schema)``, or that of ``transformFunc`` run
        on an empty DataFrame of `schema` (planning only)."""
        if self.isSet(self.transformSchemaFunc):
            return self.getTransformSchema()(schema)
        empty = SparkSession.active().createDataFrame([], schema)
        return self._run(empty).schema

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return self._run(dataset)
