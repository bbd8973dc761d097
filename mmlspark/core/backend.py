"""Where the stages run: on the JVM (the mmlspark jar) or in Python (onnxruntime, in Arrow UDFs).

``auto`` (the default) runs a stage on the JVM when the session can load the jar: a classic
session started with it (``mmlspark.session()``, ``mmlspark.spark_conf()``), or a Spark Connect
server that has it. Otherwise (serverless and shared Connect-based compute, any Connect server
started without the jar) the stages that have a Python backend run there, with the same params,
results and saved format. The choice is made once per session, logged once, and readable with
:func:`backend_decision`.

>>> import mmlspark
>>> mmlspark.set_backend("python")  # doctest: +SKIP (every new stage, whatever the session)
>>> mmlspark.backend_decision(spark)          # doctest: +SKIP
BackendDecision(backend='python', reason="set to 'python'")
"""

from __future__ import annotations

import logging
import os
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["BACKENDS", "BackendDecision", "set_backend", "get_backend", "backend_decision"]

BACKENDS = ("auto", "jvm", "python")

_log = logging.getLogger("mmlspark")
_chosen: str | None = None
# Decisions of `auto`, per session, so each session is probed and logged once.
_decided: weakref.WeakKeyDictionary[Any, BackendDecision] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class BackendDecision:
    """The backend the stages of a session run on, and why."""

    backend: str
    reason: str


def _checked(name: str, source: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{source}: backend must be one of {', '.join(BACKENDS)} but was {name!r}")
    return name


def set_backend(name: str | None) -> None:
    """Sets the backend of the stages made from now on: ``"auto"``, ``"jvm"`` or ``"python"``
    (``None``: back to the ``MMLSPARK_BACKEND`` environment variable, else ``auto``). A stage
    keeps the backend it was made with; :meth:`setBackend` on a stage overrides it."""
    global _chosen
    _chosen = None if name is None else _checked(name, "set_backend")


def get_backend() -> str:
    """The backend setting: :func:`set_backend`'s, else ``MMLSPARK_BACKEND``'s, else ``auto``."""
    if _chosen is not None:
        return _chosen
    return _checked(os.environ.get("MMLSPARK_BACKEND", "auto"), "MMLSPARK_BACKEND")


#: Whether the Spark Connect server's JVM can load the jar's build information, asked with a
#: query that cannot fail: ``reflect`` of a missing class fails the query's analysis, which the
#: server logs at ERROR with its whole trace (on serverless compute, for every session).
_LOADABLE = (
    "SELECT reflect('org.apache.spark.util.Utils', 'classIsLoadable', 'mmlspark.core.BuildInfo')"
    " AS v"
)


def _remote_jar_version(spark: Any) -> str | None:
    """The mmlspark version the Spark Connect server's JVM has, through SQL's ``reflect``; None
    where it has no mmlspark jar."""
    if spark.sql(_LOADABLE).collect()[0]["v"] != "true":
        return None
    row = spark.sql("SELECT reflect('mmlspark.core.BuildInfo', 'version') AS v").collect()[0]
    return str(row["v"])


def _auto(spark: Any) -> BackendDecision:
    from pyspark.sql.utils import is_remote

    from mmlspark._version import __version__

    if spark is None:
        return BackendDecision("python", "no Spark session is running to load the jar into")
    if not is_remote():
        from mmlspark.core.session import require_jvm_library

        try:
            require_jvm_library(spark.sparkContext)
        except RuntimeError as error:
            return BackendDecision("python", f"the classic session cannot run the jar: {error}")
        return BackendDecision("jvm", "the session has the mmlspark jar")
    from mmlspark.core.compat import connect_ml_supported

    if not connect_ml_supported():
        return BackendDecision("python", "this pyspark's Spark Connect runs no JVM ML stages")
    try:
        version = _remote_jar_version(spark)
    except Exception as error:  # the server refuses reflection
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return BackendDecision(
            "python", f"the Spark Connect server cannot load the mmlspark jar ({first[:200]})"
        )
    if version is None:
        return BackendDecision("python", "the Spark Connect server has no mmlspark jar")
    if version != __version__:
        return BackendDecision(
            "python",
            f"the Spark Connect server has mmlspark jar {version}, not {__version__}",
        )
    return BackendDecision("jvm", "the Spark Connect server has the mmlspark jar")


def _current_session() -> Any:
    """The session stages made now run in: the thread's active one, else (a thread Spark knows
    nothing of) the process's classic one."""
    from pyspark.sql import SparkSession
    from pyspark.sql.utils import is_remote

    spark = SparkSession.getActiveSession()
    if spark is None and not is_remote():
        spark = getattr(SparkSession, "_instantiatedSession", None)
    return spark


def backend_decision(spark: Any = None, setting: str | None = None) -> BackendDecision:
    """Where stages made now run, and why: ``setting`` (a stage's own), else :func:`get_backend`;
    ``auto`` is decided for ``spark`` (default: the active session), once per session, and
    logged once on the ``mmlspark`` logger."""
    setting = _checked(setting, "setBackend") if setting is not None else get_backend()
    if setting != "auto":
        return BackendDecision(setting, f"set to '{setting}'")
    if spark is None:
        spark = _current_session()
    if spark is None or spark not in _decided:
        decision = _auto(spark)
        if spark is not None:
            _decided[spark] = decision
        if decision.backend == "python":
            _log.warning("mmlspark stages run on the Python backend: %s", decision.reason)
        else:
            _log.info("mmlspark stages run on the JVM backend: %s", decision.reason)
        return decision
    return _decided[spark]


def files_in_python(spark: Any = None, setting: str | None = None) -> bool:
    """Whether files are listed and read by Python rather than by the jar's readers: over Spark
    Connect (whose client cannot reach the server's JVM), and wherever the stages run on the
    Python backend (``setting`` as :func:`backend_decision` takes it)."""
    from pyspark.sql.utils import is_remote

    return is_remote() or backend_decision(spark, setting).backend == "python"
