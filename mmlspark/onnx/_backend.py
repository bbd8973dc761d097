"""ONNXModel on the Python backend, driver side: onnxruntime in an Arrow UDF (``mapInArrow``), no
jar.

The stage is checked against the model and the input schema here, before any job, as the JVM
stage checks it (``scala/.../onnx``), and the plan made here is what the tasks run with the engine
(``mmlspark._engine.ort``). The model file goes to the executors once (SparkContext.addFile, or a
file artifact over Spark Connect), or, where neither is allowed, with the UDF.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from pyspark.sql import functions as F
from pyspark.sql import types as T

from mmlspark._engine._CudaOptions import FIXED, FROM_SETTINGS
from mmlspark._engine.messages import row_message
from mmlspark._engine.ort import (
    FLOATS,
    Plan,
    made_vector,
    model_specs,
    partition,
    softmax_is_double,
)
from mmlspark._engine.tensors import FEED_DTYPES, Feed, Fetch, Spec, is_transposed, show
from mmlspark.core.checks import catalog_string, require_absent, require_column, require_distinct
from mmlspark.core.fused import Step, run_step

if TYPE_CHECKING:
    from mmlspark.onnx.onnx_model import ONNXModel

__all__ = ["transform", "plan"]


def _source(data_type: Any) -> tuple[str, int]:
    """The element kind and the array depth of a Spark column type."""
    from pyspark.ml.linalg import VectorUDT

    depth = 0
    while isinstance(data_type, T.ArrayType):
        data_type, depth = data_type.elementType, depth + 1
    if isinstance(data_type, VectorUDT):
        return "vector", depth
    if isinstance(data_type, T.BinaryType):
        return "binary", depth
    if isinstance(data_type, T.BooleanType):
        return "bool", depth
    if isinstance(data_type, T.StringType):
        return "string", depth
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return "float", depth
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int", depth
    return "unsupported", depth


def _mapping(value: str) -> dict[str, str]:
    """One of the stage's maps (feedDict, fetchDict, ...), stored as JSON."""
    return dict(json.loads(value))


def _names(specs: list[Spec]) -> str:
    return ", ".join(s.describe() for s in specs)


def _only(
    fail: Callable[[str], NoReturn], kind: str, column: str | None, specs: list[Spec]
) -> tuple[Spec, str]:
    """The model's one input (or output) and the column inputCol (outputCol) names, when feedDict
    (fetchDict) is empty."""
    if column is None:
        fail(row_message(f"no{kind}Col"))
    if len(specs) != 1:
        fail(row_message(f"many{kind}s", count=len(specs), **{f"{kind.lower()}s": _names(specs)}))
    return specs[0], column


def plan(stage: ONNXModel, model: bytes, schema: Any) -> Plan:
    """Checks the stage against the model and the input schema (failing before any job, as the
    JVM stage does) and gives the plan the tasks run."""
    settings = stage._spec()
    name = f"ONNXModel {settings.uid}"

    def fail(message: str) -> NoReturn:
        raise ValueError(f"{name}: {message}")

    inputs, outputs = model_specs(model, stage._model_what())
    wanted = list(dict.fromkeys(_mapping(settings.fetchDict).values()))
    inner = [w for w in wanted if w not in {s.name for s in outputs}]
    if inner:
        # fetchDict names tensors inside the model: run the model cut so that exactly the
        # fetched tensors are its outputs, as the JVM stage does.
        from mmlspark.onnx._graph import cut

        try:
            model = cut(model, wanted)
        except ValueError as error:
            fail(
                row_message("notCut", names=", ".join(inner), outputs=_names(outputs), error=error)
            )
        inputs, outputs = model_specs(model, f"{name}: the model cut at {', '.join(wanted)}")
    by_input = {s.name: s for s in inputs}
    by_output = {s.name: s for s in outputs}
    feed_dict = _mapping(settings.feedDict)
    if feed_dict:
        for model_input in feed_dict:
            if model_input not in by_input:
                fail(row_message("unknownInput", input=model_input, inputs=_names(inputs)))
        missing = [s for s in inputs if s.name not in feed_dict]
        if missing:
            fail(row_message("unfed", inputs=_names(missing)))
    else:
        only, column = _only(fail, "Input", settings.inputCol, inputs)
        feed_dict = {only.name: column}
    feeds = []
    for spec in inputs:
        column = feed_dict[spec.name]
        if spec.type not in {v[0] for v in FEED_DTYPES.values()}:
            fail(row_message("notFeedable", input=spec.describe()))
        field = require_column(stage, schema, column)
        source, _ = _source(field.dataType)
        ok = (
            source == "string"
            if spec.type == "string"
            else source in ("float", "int", "vector", "bool")
            if spec.type == "bool"
            else source in ("float", "int", "vector", "binary")
        )
        if not ok:
            expected = {"string": "feedStrings", "bool": "feedBooleans"}.get(
                spec.type, "feedNumbers"
            )
            fail(
                row_message(
                    "columnType",
                    column=column,
                    expected=row_message(
                        "feedType", expected=row_message(expected), input=spec.describe()
                    ),
                    actual=catalog_string(field.dataType),
                )
            )
        template = spec.row_shape
        meta = field.metadata.get("tensorShape") if field.metadata else None
        if meta is not None and is_transposed(tuple(int(m) for m in meta), template):
            fail(
                row_message(
                    "transposedColumn",
                    column=column,
                    shape=show(meta),
                    input=spec.describe(),
                    template=show(template),
                )
            )
        if meta is not None and len(meta) == len(template):
            template = tuple(t if t >= 0 else int(m) for t, m in zip(template, meta, strict=True))
        dtype = next(v[1] for v in FEED_DTYPES.values() if v[0] == spec.type)
        feeds.append(Feed(spec, column, source, template, dtype))
    fetch_dict = _mapping(settings.fetchDict)
    if fetch_dict:
        for output in fetch_dict.values():
            if output not in by_output:
                fail(row_message("unknownOutput", output=output, outputs=_names(outputs)))
    else:
        only, column = _only(fail, "Output", settings.outputCol, outputs)
        fetch_dict = {column: only.name}
    fetches = tuple(Fetch(c, by_output[o]) for c, o in fetch_dict.items())
    for f in fetches:
        kinds = f.output.map_of or (f.output.type,)
        if not all(kind in _SPARK_TYPES for kind in kinds):
            fail(row_message("notFetchable", output=f.output.describe()))
    fetched = {f.column: f for f in fetches}
    softmax, argmax = [], []
    for param, value in (
        ("softMaxDict", settings.softMaxDict),
        ("argMaxDict", settings.argMaxDict),
    ):
        for column, new in _mapping(value).items():
            if column not in fetched:
                fail(
                    row_message(
                        "notFetched", param=param, column=column, fetched=", ".join(fetched)
                    )
                )
            out = fetched[column].output
            if out.type not in FLOATS or not out.row_shape:
                fail(row_message("notFloating", param=param, column=column, output=out.describe()))
            if param == "softMaxDict":
                softmax.append((column, new, settings.softMaxVectors and len(out.row_shape) == 1))
            else:
                argmax.append((column, new))
    added = [f.column for f in fetches] + [n for _, n, _ in softmax] + [n for _, n in argmax]
    added.append(settings.errorCol)
    for column in added:
        require_absent(stage, schema, column)
    require_distinct(stage, "output columns", added)
    batched = all(f.input.shape and f.input.shape[0] == -1 for f in feeds)
    return Plan(
        model=model,
        digest=hashlib.sha256(model).hexdigest(),
        feeds=tuple(feeds),
        fetches=fetches,
        softmax=tuple(softmax),
        argmax=tuple(argmax),
        error_col=settings.errorCol,
        batch=settings.miniBatchSize if batched else 1,
        vectors=settings.vectorOutputs,
        device=settings.deviceType,
        settings=(settings.optimizationLevel, settings.intraOpThreads),
        cuda_options=cuda_options(settings),
    )


def cuda_options(settings: Any) -> tuple[tuple[str, str], ...]:
    """The CUDA provider's options besides the device for the stage's `settings` (its spec), by
    the table the JVM's sessions use (mmlspark.onnx.CudaOptions, generated)."""
    options = []
    for option, setting, when_positive in FROM_SETTINGS:
        value = getattr(settings, setting)
        if not (when_positive and value <= 0):
            options.append((option, str(value)))
    return (*options, *FIXED)


_SPARK_TYPES = {
    "float": "float",
    "float16": "float",
    "double": "double",
    "int8": "tinyint",
    "uint8": "int",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "bool": "boolean",
    "string": "string",
}


def _output_type(plan: Plan, fetch: Fetch) -> Any:
    if fetch.output.map_of is not None:
        key, value = (T._parse_datatype_string(_SPARK_TYPES[t]) for t in fetch.output.map_of)
        return T.MapType(key, value, valueContainsNull=False)
    element = T._parse_datatype_string(_SPARK_TYPES[fetch.output.type])
    if not fetch.output.row_shape:
        return element
    if made_vector(plan, fetch):
        return T.ArrayType(T.DoubleType(), containsNull=False)  # made a vector after the UDF
    return T.ArrayType(element, containsNull=False)


def _vector(column: Any) -> Any:
    """An array<double> column as ML vectors, null staying null (Spark's array_to_vector fails on
    a null)."""
    from pyspark.ml.functions import array_to_vector

    return F.when(column.isNotNull(), array_to_vector(column))


# The models shipped, by (application or Connect session, file name).
_SHIPPED: set[tuple[str, str]] = set()


def _model_folder() -> str:
    """This process's folder of the model files it ships, removed when the process exits, with the
    folders that processes killed before they could remove theirs left behind (the process of
    their name is gone: a survey's driver killed mid-run, a notebook's kernel restarted)."""
    import atexit
    import os
    import re
    import shutil
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"mmlspark-models-{os.getpid()}")
    if not os.path.isdir(folder):
        for other in os.scandir(tempfile.gettempdir()):
            match = re.fullmatch(r"mmlspark-models-(\d+)", other.name)
            if match and not _alive(int(match.group(1))):
                shutil.rmtree(other.path, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _alive(pid: int) -> bool:
    """Whether a process `pid` runs (one of another user's included)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's
    return True


def shipped(spark: Any, the_plan: Plan) -> Plan:
    """`the_plan` with its model shipped to the executors once (SparkContext.addFile on a classic
    session, a file artifact over Spark Connect) rather than carried by every task's UDF; the
    plan as it is where the session cannot ship files."""
    import dataclasses
    import logging
    import os

    from pyspark.sql.utils import is_remote

    name = f"mmlspark-model-{the_plan.digest}.onnx"
    try:
        owner = spark.session_id if is_remote() else spark.sparkContext.applicationId
        if (owner, name) not in _SHIPPED:
            path = os.path.join(_model_folder(), name)
            if not os.path.exists(path):
                with open(path + ".part", "wb") as f:
                    f.write(the_plan.model)
                os.replace(path + ".part", path)
            if is_remote():
                spark.addArtifacts(path, file=True)
            else:
                spark.sparkContext.addFile(path)
            _SHIPPED.add((owner, name))
    except Exception as error:  # noqa: BLE001 (the UDF then carries the model)
        logging.getLogger("mmlspark").info("the model travels with the UDF: %s", error)
        return the_plan
    return dataclasses.replace(the_plan, model=b"", model_file=name)


def transform(stage: ONNXModel, model: bytes, dataset: Any) -> Any:
    """The stage's output for `dataset`, computed by onnxruntime in the Python workers."""
    the_plan = shipped(dataset.sparkSession, plan(stage, model, dataset.schema))
    fields = []
    for fetch in the_plan.fetches:
        fields.append(T.StructField(fetch.column, _output_type(the_plan, fetch)))
    for column, new, as_vector in the_plan.softmax:
        double = softmax_is_double(the_plan, column, as_vector)
        fields.append(
            T.StructField(new, T.ArrayType(T.DoubleType() if double else T.FloatType(), False))
        )
    for _, new in the_plan.argmax:
        fields.append(T.StructField(new, T.DoubleType()))
    fields.append(T.StructField(the_plan.error_col, T.StringType()))
    vectors = [fetch.column for fetch in the_plan.fetches if made_vector(the_plan, fetch)] + [
        new for _, new, as_vector in the_plan.softmax if as_vector or the_plan.vectors
    ]

    def finish(out: Any) -> Any:
        for fetch in the_plan.fetches:
            fetched = F.col(f"`{fetch.column}`")
            if fetch.column in vectors:
                fetched = _vector(fetched)
            # withMetadata: Spark Connect's withColumn drops an alias's metadata (4.3)
            out = out.withColumn(fetch.column, fetched).withMetadata(
                fetch.column, {"tensorShape": list(fetch.output.row_shape)}
            )
        for _, new, _ in the_plan.softmax:
            if new in vectors:
                out = out.withColumn(new, _vector(F.col(f"`{new}`")))
        return out

    # The UDF carries the engine's code with it (pickled by value), so the Python workers need
    # numpy, pyarrow and onnxruntime, but not mmlspark: a Connect server we do not control runs it.
    return run_step(
        dataset,
        Step(partition, the_plan),
        fields,
        finish,
        ends_chain=bool(vectors),
        reads=tuple(feed.column for feed in the_plan.feeds),
        by_column=True,
    )
