"""Fitted pipelines of mmlspark stages as MLflow models (``pip install mmlspark[mlflow]``).

:func:`log_model` logs a fitted ``PipelineModel`` (or one fitted stage) as an MLflow ``pyfunc``
model: the pipeline saved by its stages' own writers (:func:`mmlspark.save_pipeline`) is the
model's artifact, with a signature and an input example. MLflow loads it anywhere mmlspark is
installed, on either backend: ``mlflow.pyfunc.load_model(uri).predict(pandas_df)`` runs the
pipeline on a Spark DataFrame made from the pandas rows (in the active session, else a local one
that it starts) and returns the prediction columns; ``mlflow.pyfunc.spark_udf(spark, uri)`` does
the same inside Spark tasks. :func:`load_model` gives the ``PipelineModel`` back, to transform
Spark DataFrames directly (the faster way on Spark).

Photos travel as bytes, not as decoded images: give the pipeline an ``ImageDecoder`` first stage
(its ``inputCol``, ``content`` by default, takes a file's bytes) and pass the photos' bytes in
that column; a pipeline that reads files itself takes a column of paths its session can read.

>>> import mmlspark.mlflow  # doctest: +SKIP
>>> info = mmlspark.mlflow.log_model(fitted, "model", input_example=rows.limit(2).toPandas())
>>> mlflow.pyfunc.load_model(info.model_uri).predict(new_rows)        # pandas in, pandas out
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

try:
    import mlflow
    import pandas as pd  # type: ignore[import-untyped]
    from mlflow.models import ModelSignature, infer_signature
    from mlflow.pyfunc import PythonModel, PythonModelContext
except ImportError as error:
    raise ImportError(
        "mmlspark.mlflow needs MLflow, which is not installed (or failed to import: "
        f"{error}); install it with: pip install 'mmlspark[mlflow]'"
    ) from error

import mmlspark

__all__ = ["log_model", "load_model", "prediction_frame"]

#: The model's artifacts: the saved pipeline, and the Spark schema of its input rows.
_PIPELINE = "pipeline"
_INPUT_SCHEMA = "input_schema"


def _spark_session() -> Any:
    """The active Spark session, else a local one with mmlspark (the jar where this package has
    it, else a plain one, whose stages run on the Python backend). Inside a Spark task (a model
    loaded by ``spark_udf``) the local session is one of the task's own, as MLflow's Spark
    models do: one core, no UI, on loopback."""
    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    conf = {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1"}
    master = "local[*]"
    if TaskContext.get() is not None:
        master = "local[1]"
        conf["spark.executor.allowSparkContext"] = "true"
        conf["spark.driver.memory"] = "2g"  # not a quarter of the machine per Python worker
        # A Spark worker's environment may name its own JVM's gateway: start a new one.
        os.environ.pop("PYSPARK_GATEWAY_PORT", None)
        os.environ.pop("PYSPARK_GATEWAY_SECRET", None)
    try:
        return mmlspark.session(master, conf, app_name="mmlspark-mlflow")
    except FileNotFoundError:  # no jar for this Spark in the package: the Python backend
        builder = SparkSession.builder.master(master).appName("mmlspark-mlflow")
        for key, value in conf.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()


def _as_pipeline(model: Any) -> Any:
    from pyspark.ml import PipelineModel

    return model if isinstance(model, PipelineModel) else PipelineModel([model])


def _added_by_last_stage(pipeline: Any, rows: Any) -> list[str]:
    """The columns the pipeline's last stage adds to `rows` (from the schemas: no job runs)."""
    from pyspark.ml import PipelineModel

    before = PipelineModel(pipeline.stages[:-1]).transform(rows).columns
    return [c for c in pipeline.transform(rows).columns if c not in before]


def prediction_frame(transformed: Any, prediction_cols: list[str]) -> Any:
    """The pandas DataFrame of `prediction_cols` of `transformed` (a Spark DataFrame), with ML
    vectors as lists of floats (what MLflow signatures describe)."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in transformed.schema.fields}
    missing = [c for c in prediction_cols if c not in types]
    if missing:
        raise ValueError(
            f"mmlspark.mlflow: prediction columns {missing} are not in the pipeline's output "
            f"(its columns: {sorted(types)})"
        )
    columns = [
        vector_to_array(F.col(c)).alias(c) if isinstance(types[c], VectorUDT) else F.col(c)
        for c in prediction_cols
    ]
    return transformed.select(*columns).toPandas()


def _spark_rows(spark: Any, frame: Any, schema: Any) -> Any:
    """`frame` (pandas) as a Spark DataFrame of `schema` (the columns the model was logged
    with): numpy arrays in cells as lists, and base64 text in a binary column (how JSON, so
    MLflow's serving input, carries bytes) as its bytes."""
    import base64

    import numpy as np
    from pyspark.sql.types import BinaryType

    binary = [isinstance(f.dataType, BinaryType) for f in schema.fields]

    def cell(value: Any, is_binary: bool) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if is_binary and isinstance(value, str):
            return base64.b64decode(value)
        return value

    records = [
        tuple(cell(v, b) for v, b in zip(row, binary, strict=True))
        for row in frame[list(schema.names)].itertuples(index=False, name=None)
    ]
    return spark.createDataFrame(records, schema)


class PipelinePredictor(PythonModel):  # type: ignore[misc]
    """The ``pyfunc`` model :func:`log_model` logs: runs the saved pipeline on a Spark session
    (the active one, else a local one) and returns `prediction_cols` as a pandas DataFrame."""

    def __init__(self, prediction_cols: list[str]) -> None:
        self.prediction_cols = list(prediction_cols)

    def load_context(self, context: PythonModelContext) -> None:
        from pyspark.sql.types import StructType

        self._spark = _spark_session()
        self._pipeline = mmlspark.load_pipeline(context.artifacts[_PIPELINE])
        schema = Path(context.artifacts[_INPUT_SCHEMA]).read_text()
        self._schema = StructType.fromJson(json.loads(schema))

    # MLflow reads the hint of `model_input` (pandas: no validation of its own; the signature
    # validates), so pandas is imported at module level.
    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: Any = None
    ) -> pd.DataFrame:
        rows = _spark_rows(self._spark, model_input, self._schema)
        return prediction_frame(self._pipeline.transform(rows), self.prediction_cols)


def _requirements() -> list[str]:
    """What the model needs where it is loaded, at the versions installed here (given, so that
    MLflow does not load the model in a process of its own to find out): MLflow's client is the
    full package or mlflow-skinny, whichever is installed."""
    from importlib.metadata import PackageNotFoundError, version

    import pyspark

    found = [f"mmlspark=={mmlspark.__version__}", f"pyspark=={pyspark.__version__}"]
    for names in (("mlflow", "mlflow-skinny"), ("pandas",), ("pyarrow",)):
        for name in names:
            try:
                found.append(f"{name}=={version(name)}")
                break
            except PackageNotFoundError:
                continue
    return found


def log_model(
    pipeline_model: Any,
    name: str = "model",
    *,
    input_example: Any,
    prediction_cols: list[str] | None = None,
    signature: ModelSignature | None = None,
    spark: Any = None,
    **kwargs: Any,
) -> Any:
    """Logs a fitted ``PipelineModel`` (or one fitted stage) as an MLflow ``pyfunc`` model in
    the active run (one is started if none is), and returns MLflow's ``ModelInfo``.

    Parameters
    ----------
    pipeline_model : PipelineModel or a fitted stage
        Saved with :func:`mmlspark.save_pipeline`, so stages of either backend are saved.
    name : str
        The model's name in the run (MLflow's ``name``; ``artifact_path`` before MLflow 3).
    input_example : pandas.DataFrame
        A few input rows, with the columns the pipeline reads (photos as bytes: see the module).
        The pipeline runs on them once, in `spark`, for the signature.
    prediction_cols : list of str, optional
        The output columns ``predict`` returns. Default: the columns the last stage adds
        (``prediction`` for an ``IndexToString`` last; ``rawPrediction``, ``probability``,
        ``prediction`` for a classifier). ML vectors come out as lists of floats.
    signature : ModelSignature, optional
        Default: inferred from `input_example` and the pipeline's output on it.
    spark : SparkSession, optional
        The session to run the example in; default the active one, else a local one.
    **kwargs
        Passed to ``mlflow.pyfunc.log_model`` (``registered_model_name``, ``pip_requirements``,
        ``metadata``, ...). ``pip_requirements`` defaults to this mmlspark, pyspark, mlflow,
        pandas and pyarrow at their installed versions.

    Examples
    --------
    >>> example = rows.limit(2).toPandas()  # doctest: +SKIP
    >>> info = mmlspark.mlflow.log_model(model, "model", input_example=example)  # doctest: +SKIP
    >>> mlflow.pyfunc.load_model(info.model_uri).predict(example)  # doctest: +SKIP
    """
    pipeline = _as_pipeline(pipeline_model)
    spark = spark or _spark_session()
    rows = spark.createDataFrame(input_example)
    if prediction_cols is None:
        prediction_cols = _added_by_last_stage(pipeline, rows)
    if signature is None:
        output = prediction_frame(pipeline.transform(rows), prediction_cols)
        signature = infer_signature(input_example, output)
    kwargs.setdefault("pip_requirements", _requirements())
    with tempfile.TemporaryDirectory(prefix="mmlspark-mlflow-") as folder:
        saved = Path(folder) / _PIPELINE
        mmlspark.save_pipeline(pipeline, str(saved))
        schema = Path(folder) / "input_schema.json"
        schema.write_text(rows.schema.json())
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=PipelinePredictor(prediction_cols),
            artifacts={_PIPELINE: str(saved), _INPUT_SCHEMA: str(schema)},
            signature=signature,
            input_example=input_example,
            **kwargs,
        )


def load_model(model_uri: str) -> Any:
    """The ``PipelineModel`` a model logged by :func:`log_model` holds, loaded with
    :func:`mmlspark.load_pipeline` on the backend the session runs stages on (the active
    session, else a local one)."""
    _spark_session()
    local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri)
    folder = Path(local) / "artifacts" / _PIPELINE
    if not folder.is_dir():
        raise ValueError(f"{model_uri} is not a model logged by mmlspark.mlflow.log_model")
    return mmlspark.load_pipeline(str(folder))
