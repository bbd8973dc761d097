"""UDFTransformer: a function as a stage, over one column or several.

A Python-only stage (see ``mmlspark.stages._pickled`` for why it has no JVM form): it runs the same
on classic sessions, with or without the mmlspark jar, and over Spark Connect, since what it does
is one ``withColumn`` of the session's own UDF machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark import keyword_only
from pyspark.ml import Transformer
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import is_remote

from mmlspark.core.checks import fail, quoted, require, require_column
from mmlspark.core.compat import PythonEvalType
from mmlspark.core.shared_params import HasInputCol, HasInputCols, HasOutputCol
from mmlspark.stages._pickled import FunctionStage, function_param

__all__ = ["UDFTransformer", "PythonUDF"]

#: The UDF kinds that give one value per row, which a column can hold.
_ROW_WISE = {
    value
    for name, value in vars(PythonEvalType).items()
    if name in ("SQL_BATCHED_UDF", "SQL_ARROW_BATCHED_UDF") or name.startswith("SQL_SCALAR_")
}


@dataclass(frozen=True)
class PythonUDF:
    """A pyspark UDF as plain data (its function, return type, kind), which pickles and which
    makes a UDF of whichever session runs it (classic or Spark Connect)."""

    func: Any
    returnType: T.DataType
    evalType: int
    deterministic: bool
    name: str

    @staticmethod
    def of(value: Any) -> PythonUDF:
        """The UDF `value` (made by ``udf``, ``pandas_udf`` or ``@udf``) as data; anything else
        is refused, saying how to make one."""
        if isinstance(value, PythonUDF):
            return value
        fields = ("func", "returnType", "evalType", "deterministic")
        if not all(hasattr(value, f) for f in fields) or not callable(value.func):
            raise TypeError(
                f"UDFTransformer.udf: expected a pyspark UDF (pyspark.sql.functions.udf or "
                f"pandas_udf), got {type(value).__name__}; wrap a Python function as "
                "udf(f, returnType), or name a SQL function with sqlFunction"
            )
        if value.evalType not in _ROW_WISE:
            raise TypeError(
                f"UDFTransformer.udf: a UDF of kind {value.evalType} (grouped, map or table) "
                "gives no value per row; use a row-wise udf or a scalar pandas_udf"
            )
        name = getattr(value.func, "__name__", None) or "udf"
        return PythonUDF(
            value.func, value.returnType, value.evalType, value.deterministic, str(name)
        )

    def udf(self) -> Any:
        """The UDF, made for the session this process runs (classic or Spark Connect)."""
        if is_remote():
            from pyspark.sql.connect.udf import UserDefinedFunction
        else:
            from pyspark.sql.udf import UserDefinedFunction  # type: ignore[assignment]
        return UserDefinedFunction(
            self.func, self.returnType, self.name, self.evalType, self.deterministic
        )


class UDFTransformer(HasInputCol, HasInputCols, HasOutputCol, Transformer, FunctionStage):
    """Applies a function to ``inputCol`` (one argument) or to ``inputCols`` (one argument per
    column, in order) and writes the result to ``outputCol`` (default ``<uid>_output``); an
    existing column of that name is replaced in place, as ``withColumn`` does.

    The function is either a Python UDF, ``setUDF(udf(f, returnType))`` or a scalar
    ``pandas_udf``, or a SQL function named by ``sqlFunction``: a built-in one (``"upper"``) or
    one registered with the session (``spark.udf.register``, or a Scala/Java UDF through
    ``spark.udf.registerJavaFunction``). Setting one clears the other. A stage holding a Python
    UDF saves it with cloudpickle, in ``functions.pkl`` next to its metadata; a stage naming a SQL
    function saves the name, and the function must be registered where the stage is loaded.

    Examples
    --------
    >>> from pyspark.sql.functions import udf
    >>> from mmlspark.stages import UDFTransformer
    >>> square = UDFTransformer(inputCol="x", outputCol="x2").setUDF(udf(lambda v: v * v, "long"))
    >>> square.transform(spark.range(3).withColumnRenamed("id", "x")).orderBy("x").collect()[2].x2
    4
    """

    udf: Param[PythonUDF] = function_param(
        "udf", "the Python UDF applied to the input column(s) (udf or a scalar pandas_udf)"
    )
    sqlFunction: Param[str] = Param(
        Params._dummy(),
        "sqlFunction",
        "name of a SQL function applied to the input column(s): a built-in one or one registered "
        "with the session (a Python, Scala or Java UDF)",
        typeConverter=TypeConverters.toString,
    )

    _java_class_name = "mmlspark.stages.UDFTransformer"
    _function_params = ("udf",)

    @keyword_only
    def __init__(
        self,
        *,
        inputCol: str | None = None,
        inputCols: list[str] | None = None,
        outputCol: str | None = None,
        udf: Any = None,
        sqlFunction: str | None = None,
    ) -> None:
        super().__init__()
        self._setDefault(outputCol=self.uid + "_output")
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(
        self,
        *,
        inputCol: str | None = None,
        inputCols: list[str] | None = None,
        outputCol: str | None = None,
        udf: Any = None,
        sqlFunction: str | None = None,
    ) -> UDFTransformer:
        """Sets the params given by keyword; the others keep their values."""
        kwargs = dict(self._input_kwargs)
        if kwargs.get("udf") is not None and kwargs.get("sqlFunction") is not None:
            fail(self, "set udf or sqlFunction, not both")
        for name in ("inputCol", "inputCols", "outputCol"):
            if name in kwargs:
                getattr(self, "set" + name[0].upper() + name[1:])(kwargs[name])
        if kwargs.get("udf") is not None:
            self.setUDF(kwargs["udf"])
        if kwargs.get("sqlFunction") is not None:
            self.setSqlFunction(kwargs["sqlFunction"])
        return self

    def setInputCol(self, value: str) -> UDFTransformer:
        """The one input column; refused where ``inputCols`` is set."""
        require(self, not self.isSet(self.inputCols), "set inputCol or inputCols, not both")
        require(self, isinstance(value, str) and value != "", "inputCol must be a column name")
        return self._set(inputCol=value)  # type: ignore[no-any-return]

    def setInputCols(self, value: list[str]) -> UDFTransformer:
        """The input columns, one argument each; refused where ``inputCol`` is set."""
        require(self, not self.isSet(self.inputCol), "set inputCol or inputCols, not both")
        names = list(value)
        require(
            self,
            bool(names) and all(isinstance(n, str) and n for n in names),
            "inputCols must name at least one column",
        )
        return self._set(inputCols=names)  # type: ignore[no-any-return]

    def setOutputCol(self, value: str) -> UDFTransformer:
        """The output column (replaced in place where it exists)."""
        require(self, isinstance(value, str) and value != "", "outputCol must be a column name")
        return self._set(outputCol=value)  # type: ignore[no-any-return]

    def setUDF(self, value: Any) -> UDFTransformer:
        """The Python UDF to apply (``udf(f, returnType)``, ``@udf``, a scalar ``pandas_udf``);
        clears ``sqlFunction``."""
        self.clear(self.sqlFunction)
        return self._set(udf=PythonUDF.of(value))  # type: ignore[no-any-return]

    def getUDF(self) -> Any:
        """The Python UDF, made for the running session (it may be called on columns)."""
        return self.getOrDefault(self.udf).udf()

    def setSqlFunction(self, value: str) -> UDFTransformer:
        """The name of the SQL function to apply; clears ``udf``."""
        require(self, isinstance(value, str) and value != "", "sqlFunction must be a name")
        self.clear(self.udf)
        return self._set(sqlFunction=value)  # type: ignore[no-any-return]

    def getSqlFunction(self) -> str:
        return self.getOrDefault(self.sqlFunction)  # type: ignore[no-any-return]

    def _input_names(self, schema: T.StructType) -> list[str]:
        has_one, has_many = self.isSet(self.inputCol), self.isSet(self.inputCols)
        require(self, has_one or has_many, "param 'inputCol' or 'inputCols' must be set")
        require(
            self,
            self.isSet(self.udf) or self.isSet(self.sqlFunction),
            "no function: set udf (setUDF(udf(f, returnType))) or sqlFunction",
        )
        names = [self.getInputCol()] if has_one else list(self.getInputCols())
        for name in names:
            require_column(self, schema, name)
        return names

    def _applied(self, dataset: DataFrame) -> Column:
        names = self._input_names(dataset.schema)
        columns = [dataset[quoted(n)] for n in names]
        if self.isSet(self.udf):
            return self.getUDF()(*columns)  # type: ignore[no-any-return]
        return F.call_function(self.getSqlFunction(), *columns)

    def transformSchema(self, schema: T.StructType) -> T.StructType:
        """The schema ``transform`` gives: the input's, with ``outputCol`` added last (or
        replaced in place) with the UDF's return type. For ``sqlFunction`` the type is the
        session's answer for the function over an empty DataFrame of `schema` (no job runs)."""
        names = self._input_names(schema)
        if self.isSet(self.udf):
            field = T.StructField(self.getOutputCol(), self.getOrDefault(self.udf).returnType)
        else:
            spark = SparkSession.active()
            empty = spark.createDataFrame([], schema)
            cols = [empty[quoted(n)] for n in names]
            field = empty.select(
                F.call_function(self.getSqlFunction(), *cols).alias(self.getOutputCol())
            ).schema.fields[0]
        out = [field if f.name == field.name else f for f in schema.fields]
        if field.name not in schema.fieldNames():
            out.append(field)
        return T.StructType(out)

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return dataset.withColumn(self.getOutputCol(), self._applied(dataset))
