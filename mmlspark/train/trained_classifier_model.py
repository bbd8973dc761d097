"""TrainedClassifierModel, on the JVM or the Python backend."""

from __future__ import annotations

from typing import Any

from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark.core.checks import quoted, require_absent
from mmlspark.train import scores, training
from mmlspark.train._TrainedClassifierModel import _TrainedClassifierModel


def class_metadata(levels: list[str]) -> dict[str, Any]:
    """The ML attribute metadata naming the classes of a prediction column (Spark's
    ``NominalAttribute`` named 'prediction' with these values)."""
    return {"ml_attr": {"vals": list(levels), "type": "nominal", "name": "prediction"}}


def output_schema(
    stage: Any,
    schema: T.StructType,
    label_type: T.DataType,
    learner: Any,
    label: str,
    features: str | None,
) -> T.StructType:
    """The output of a trained classifier: the input, the features when kept, the learner's
    class score vectors and the prediction, each score column with its score metadata."""
    vector_cols = [
        (str(learner.getOrDefault(p)), role)
        for p, role in (("rawPredictionCol", "rawPrediction"), ("probabilityCol", "probability"))
        if learner.hasParam(p)
    ]
    added = ([features] if features else []) + [c for c, _ in vector_cols] + ["prediction"]
    for c in added:
        require_absent(stage, schema, c)
    fields = list(schema.fields)
    if features:
        fields.append(T.StructField(features, VectorUDT()))
    for c, role in vector_cols:
        fields.append(
            T.StructField(
                c, VectorUDT(), metadata=scores.score_metadata(role, "classification", label)
            )
        )
    meta = scores.score_metadata("prediction", "classification", label)
    fields.append(T.StructField("prediction", label_type, metadata=meta))
    return T.StructType(fields)


class TrainedClassifierModel(_TrainedClassifierModel):
    __doc__ = _TrainedClassifierModel.__doc__
    _python_backend = True

    def _python_schema(self, schema: T.StructType) -> T.StructType:
        training.check_columns(self, schema, self.getInputCols())
        return output_schema(
            self,
            schema,
            training.parse_label_type(self.getLabelType()),
            self.getOrDefault(self.model),
            self.getLabelCol(),
            self.getFeaturesCol() if self.isSet(self.featuresCol) else None,
        )

    def _python_transform(self, dataset: DataFrame) -> DataFrame:
        """Featurizes like at training, runs the fitted learner and adds ``prediction``, the
        class in the label's type, as the JVM model does."""
        schema = self._python_schema(dataset.schema)
        levels = self.getLevels()
        index_col = training.helper_prefix(self) + "prediction"
        scored = training.score(self, dataset)
        # As the JVM's typedLit of the levels: an array that may hold nulls, so the class is
        # nullable as it is there.
        classes = F.array(*[F.lit(c) for c in levels]).cast(T.ArrayType(T.StringType(), True))
        predicted = F.element_at(classes, F.col(quoted(index_col)).cast("int") + 1).cast(
            training.parse_label_type(self.getLabelType())
        )
        meta = {**class_metadata(levels), **schema["prediction"].metadata}
        vectors = {
            f.name: f.metadata
            for f in schema.fields
            if scores.role(f) is not None and scores.role(f) != "prediction"
        }
        dropped = {index_col}
        if not self.isSet(self.featuresCol):
            dropped.add(training.features_column(self))
        columns = [
            F.col(quoted(c)).alias(c, metadata=vectors[c]) if c in vectors else F.col(quoted(c))
            for c in scored.columns
            if c not in dropped
        ]
        return scored.select(*columns, predicted.alias("prediction", metadata=meta))
