"""TrainRegressor, on the JVM or the Python backend."""

from __future__ import annotations

from pyspark.ml.regression import Regressor
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine.messages import row_message
from mmlspark.core.checks import quoted, require, require_column_type
from mmlspark.core.wrapper import on_python_backend
from mmlspark.train import training
from mmlspark.train._TrainRegressor import _TrainRegressor
from mmlspark.train.trained_regressor_model import TrainedRegressorModel, output_schema


class TrainRegressor(_TrainRegressor):
    __doc__ = _TrainRegressor.__doc__
    _python_backend = True

    def _python_schema(self, schema: T.StructType) -> T.StructType:
        """The checks of the JVM stage's ``transformSchema``, and the model's output schema."""
        require(self, self.isDefined(self.model), row_message("noLearner", kind="regressor"))
        learner = self.getModel()
        require(
            self,
            isinstance(learner, Regressor),
            row_message("wrongLearner", kind="regressor", held=training.jvm_class_name(learner)),
        )
        label_col = self.getLabelCol()
        require_column_type(
            self,
            schema,
            label_col,
            row_message("numericLabel"),
            lambda t: isinstance(t, T.NumericType),
        )
        training.check_columns(self, schema, training.feature_columns(self, schema))
        features = self.getFeaturesCol() if self.isSet(self.featuresCol) else None
        return output_schema(self, schema, label_col, features)

    def _fit(self, dataset: DataFrame) -> TrainedRegressorModel:
        """On the Python backend: the JVM stage's featurization with pyspark's own stages, then
        the learner (a pyspark regressor) fitted on the features."""
        if not self._on_python():
            return super()._fit(dataset)  # type: ignore[no-any-return]
        training.require_learners_run(self)
        self._python_schema(dataset.schema)
        label_col = self.getLabelCol()
        data = training.labelled(self, dataset, label_col)
        trained = on_python_backend(TrainedRegressorModel)
        trained._resetUid(self.uid)
        label = F.col(quoted(label_col))
        return training.fit_into(  # type: ignore[no-any-return]
            self, dataset, data, label, "double", trained
        )
