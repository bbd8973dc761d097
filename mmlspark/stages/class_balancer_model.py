"""ClassBalancerModel, on the JVM or the Python backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import quoted, require_absent, require_column_type
from mmlspark.core.wrapper import require_java_obj
from mmlspark.stages._ClassBalancerModel import _ClassBalancerModel


def weighted_schema(stage: Any, schema: T.StructType) -> None:
    """The checks of ``ClassBalancerParams.weightedSchema``: ``inputCol`` of an atomic type,
    ``outputCol`` new."""
    require_column_type(
        stage,
        schema,
        stage.getInputCol(),
        "an atomic (non-nested) type",
        lambda t: not isinstance(t, (T.StructType, T.ArrayType, T.MapType)),
    )
    require_absent(stage, schema, stage.getOutputCol())


class ClassBalancerModel(_ClassBalancerModel):
    __doc__ = _ClassBalancerModel.__doc__
    _python_backend = True
    # The weight table of a model on the Python backend: the type of the label column it was
    # fitted on, the classes (None for the null class) and the weight of each.
    _label_type: T.DataType = T.DoubleType()
    _labels: tuple[Any, ...] = ()
    _weights: tuple[float, ...] = ()
    # Made by ClassBalancer.fit on the Python backend, whatever the backend setting.
    _made_on_python: bool = False

    @classmethod
    def _fitted_on_python(
        cls, uid: str, label_type: T.DataType, labels: Sequence[Any], weights: Sequence[float]
    ) -> ClassBalancerModel:
        """The model ClassBalancer ``uid`` fits on the Python backend (the JVM's model keeps its
        estimator's uid too)."""
        model = cls.__new__(cls)
        model._made_on_python = True
        model.__init__()  # type: ignore[misc]
        model._resetUid(uid)
        model._label_type, model._labels, model._weights = label_type, tuple(labels), tuple(weights)
        return model

    def _chosen_backend(self, setting: str | None) -> str:
        if setting is None and self._made_on_python:
            return "python"
        return super()._chosen_backend(setting)

    def setBackend(self, name: str) -> ClassBalancerModel:
        """Runs this model on ``"jvm"``, ``"python"`` or ``"auto"``, as other stages; a fitted JVM
        model brings its weights along (on a classic session). A model fitted on the Python
        backend stays there: fit on the JVM backend to run there."""
        target = self._chosen_backend(name)
        table = None
        if target == "python" and not self._on_python():
            java_obj = require_java_obj(
                self,
                "moving a ClassBalancerModel to the Python backend",
                "fit it with ClassBalancer on the Python backend",
            )
            spark = SparkSession.getActiveSession()
            assert spark is not None
            weights = DataFrame(java_obj.weightTable(spark._jsparkSession), spark)
            table = (weights.schema["label"].dataType, weights.collect())
        elif target == "jvm" and self._on_python() and self._labels:
            raise NotImplementedError(
                f"ClassBalancerModel {self.uid} was fitted on the Python backend, which cannot "
                "hand its weights to a JVM stage; fit it with ClassBalancer on the JVM backend"
            )
        super().setBackend(name)
        if table is not None:
            self._label_type = table[0]
            self._labels = tuple(row[0] for row in table[1])
            self._weights = tuple(row[1] for row in table[1])
        return self

    def __repr__(self) -> str:
        # the JVM model's toString, its uid, also where there is no JVM model
        return self.uid if self._on_python() else super().__repr__()

    def write(self) -> Any:
        if self._on_python():
            raise NotImplementedError(
                "saving a ClassBalancerModel fitted on the Python backend is not supported (its "
                "weight table is saved by the JVM stage); fit it on a session with the jar to "
                "save it"
            )
        return super().write()

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """The input with ``outputCol``, the weight of each row's class (null for a class not
        seen when fitting), by a left join with the weight table."""
        weighted_schema(self, dataset.schema)
        label, weight = f"__label_{self.uid}", f"__weight_{self.uid}"
        table = dataset.sparkSession.createDataFrame(
            list(zip(self._labels, self._weights, strict=True)),
            T.StructType(
                [
                    T.StructField(label, self._label_type),
                    T.StructField(weight, T.DoubleType(), nullable=False),
                ]
            ),
        )
        right = F.broadcast(table) if self.getBroadcastJoin() else table
        condition = dataset[quoted(self.getInputCol())].eqNullSafe(right[quoted(label)])
        return (
            dataset.join(right, condition, "left")
            .drop(label)
            .withColumnRenamed(weight, self.getOutputCol())
        )
