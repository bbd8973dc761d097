"""MLflow tracking of `train` and `evaluate`: with ``--mlflow-uri`` (or ``MLFLOW_TRACKING_URI``)
each run is an MLflow run of experiment ``--mlflow-experiment`` with the command's options as
params, its counts and metrics as metrics, evaluate's files (the confusion matrix among them) as
artifacts, and train's model as an MLflow model (``mmlspark.mlflow``). The server is asked before
any Spark work: one that cannot be reached (or MLflow not installed) is an error, exit code 2."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mmlspark.apps.camera_trap.settings import JobError

DEFAULT_EXPERIMENT = "mmlspark-camera-trap"
TRACKED_COMMANDS = ("train", "evaluate")
#: Options that are not the run's params.
_NOT_PARAMS = {"command", "mlflow_uri", "mlflow_experiment", "verbose"}
#: How long the server is waited for before any work: one try, no retries.
_CHECK_SECONDS = "10"


def tracking_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mlflow-uri",
        metavar="URI",
        help="log the run to this MLflow tracking server (default: MLFLOW_TRACKING_URI; "
        "neither: no tracking). Needs pip install 'mmlspark[mlflow]'",
    )
    p.add_argument(
        "--mlflow-experiment",
        default=DEFAULT_EXPERIMENT,
        metavar="NAME",
        help=f"the MLflow experiment of the run (default {DEFAULT_EXPERIMENT})",
    )


@contextmanager
def _one_try() -> Iterator[None]:
    """MLflow's HTTP requests without its retries (minutes of backoff) inside the block."""
    names = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": _CHECK_SECONDS,
    }
    before = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _metric_name(name: str) -> str:
    """`name` with the characters MLflow refuses in metric names as '_'."""
    return re.sub(r"[^\w\-. /]", "_", name)


class Tracker:
    """The MLflow run of one command, started by :func:`start` and ended by :meth:`end`."""

    def __init__(self, mlflow: Any, previous_uri: str, args: argparse.Namespace) -> None:
        self.mlflow = mlflow
        self.previous_uri = previous_uri
        self.args = args

    def log_params(self) -> None:
        values = {
            k: v for k, v in vars(self.args).items() if k not in _NOT_PARAMS and v is not None
        }
        self.mlflow.log_params(values)

    def log(self, spark: Any, result: Any) -> None:
        """What the command returned: train's (model, counts), evaluate's metrics. A failure
        here is a JobError that says the command's own outputs are written."""
        try:
            if self.args.command == "train":
                self.log_train(spark, result)
            else:
                self.log_evaluate(result)
        except Exception as e:
            raise JobError(
                f"its outputs are written, but logging them to MLflow at "
                f"{self.mlflow.get_tracking_uri()} failed: {_first_line(e)}"
            ) from e

    def log_train(self, spark: Any, result: tuple[Any, dict[str, Any]]) -> None:
        """train's counts, and its model: a pyfunc model taking photos' bytes (``content``) for
        a whole-photo model; for a two-stage one (which needs the detector) its saved folder."""
        model, summary = result
        self.mlflow.log_metrics({k: float(v) for k, v in summary.items()})
        if self.args.detector:
            self.mlflow.log_artifacts(self.args.model_out, "model-folder")
            return
        from pyspark.ml import PipelineModel

        import mmlspark.mlflow
        from mmlspark.image import ImageDecoder

        size = self.args.image_size
        # Decoded at the smallest JPEG scale that covers the featurizer's input, as train does.
        decoder = ImageDecoder(
            inputCol="content",
            outputCol=model.stages[0].getInputCol(),
            minHeight=size,
            minWidth=size,
        )
        mmlspark.mlflow.log_model(
            PipelineModel([decoder, *model.stages]),
            "model",
            input_example=_example_photo(spark, self.args.images),
            prediction_cols=["prediction", "probability"],
            spark=spark,
        )

    def log_evaluate(self, metrics: dict[str, Any]) -> None:
        """evaluate's numbers (nested ones as ``group.name``, per class ones as
        ``precision_per_class.deer``) and the files it wrote."""
        self.mlflow.log_metrics(numbers(metrics))
        out = Path(self.args.out)
        for name in ("metrics.json", "confusion_matrix.png", "samples.png"):
            if (out / name).is_file():
                self.mlflow.log_artifact(str(out / name))

    def end(self, status: str) -> None:
        self.mlflow.end_run(status)
        self.mlflow.set_tracking_uri(self.previous_uri)


def numbers(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of `metrics` (nested dicts flattened with '.'), booleans and None left out."""
    found: dict[str, float] = {}
    for key, value in metrics.items():
        name = _metric_name(f"{prefix}{key}")
        if isinstance(value, dict):
            found.update(numbers(value, f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found[name] = float(value)
    return found


def _example_photo(spark: Any, images: str) -> Any:
    """The input example of the logged model: the bytes of the first photo under `images`."""
    import pandas as pd  # type: ignore[import-untyped]

    from mmlspark.apps.camera_trap.session import _qualified
    from mmlspark.image import list_files

    first = list_files(spark, _qualified(spark, images)).filter("error IS NULL").first()
    if first is None:
        raise JobError(f"no photo under {images} to give as the logged model's input example")
    content = spark.read.format("binaryFile").load(first.path).select("content").first()
    return pd.DataFrame({"content": [bytes(content.content)]})


def start(args: argparse.Namespace) -> Tracker | None:
    """The run of `args.command` (train, evaluate) when a tracking URI is given, else None.
    Raises JobError when MLflow is missing or the server cannot be reached (before any work)."""
    uri = getattr(args, "mlflow_uri", None) or os.environ.get("MLFLOW_TRACKING_URI")
    if args.command not in TRACKED_COMMANDS or not uri:
        return None
    try:
        import mlflow

        import mmlspark.mlflow  # noqa: F401 - fails early, with what to install
    except ImportError as e:
        raise JobError(
            f"--mlflow-uri (or MLFLOW_TRACKING_URI) is set but MLflow cannot be imported ({e}); "
            "install it with pip install 'mmlspark[mlflow]', or unset it"
        ) from None
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with _one_try():
            mlflow.set_experiment(args.mlflow_experiment)
            mlflow.start_run(run_name=args.command)
    except Exception as e:
        mlflow.set_tracking_uri(previous)
        raise JobError(
            f"cannot reach the MLflow tracking server at {uri}: {_first_line(e)}"
        ) from None
    tracker = Tracker(mlflow, previous, args)
    tracker.log_params()
    return tracker
