"""The one way this library's Python code reaches JVM objects that are not stages.

Each area keeps the JVM classes it calls in a small facade of its own (``mmlspark/<area>/_jvm.py``)
with keyword-only, typed functions; those facades are the only Python code that names a JVM class,
so moving a Scala helper changes one line. Everything here needs the driver's JVM (py4j), which a
Spark Connect client does not have: each entry point fails with
:class:`~mmlspark.core.wrapper.ConnectNotSupportedError` there, naming what to do instead.
"""

from __future__ import annotations

from typing import Any

from mmlspark.core.wrapper import require_classic_session

__all__ = [
    "classic_jvm",
    "jvm_class",
    "qualified_path",
    "long_param_pair",
    "java_specification_version",
    "jvm_alive",
]


def classic_jvm(spark: Any, *, feature: str, instead: str) -> Any:
    """The py4j view of the JVM of ``spark`` (a SparkSession or SparkContext); fails on a Spark
    Connect session, naming ``feature`` and what to do ``instead``."""
    require_classic_session(feature, instead)
    context = getattr(spark, "sparkContext", spark)
    jvm = getattr(context, "_jvm", None)
    if jvm is None:
        raise RuntimeError(
            f"{feature} needs a running Spark session: start one with mmlspark.session()"
        )
    return jvm


def jvm_class(jvm: Any, class_name: str) -> Any:
    """The JVM class (or Scala object) ``class_name`` (``"mmlspark.image.ImageReader"``) through
    the py4j view ``jvm``."""
    found = jvm
    for part in class_name.split("."):
        found = getattr(found, part)
    return found


def qualified_path(spark: Any, path: str) -> str:
    """``path`` as Spark reports file paths (``file:/...`` for local ones), without a trailing
    ``/``: qualified by the Hadoop filesystem that serves it."""
    jvm = classic_jvm(spark, feature="qualified_path", instead="pass fully qualified paths")
    hadoop_path = jvm_class(jvm, "org.apache.hadoop.fs.Path")(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return str(fs.makeQualified(hadoop_path).toString()).rstrip("/")


def long_param_pair(java_param: Any, value: int) -> Any:
    """The JVM ``ParamPair`` of a ``LongParam`` and ``value`` as a ``Long`` (py4j alone would send
    a small int as an ``Integer``, which the param fails on when it is validated or saved)."""
    from pyspark import SparkContext

    jvm = classic_jvm(SparkContext._active_spark_context, feature="LongParam", instead="")
    return jvm_class(jvm, "mmlspark.contracts.PythonParams").longPair(java_param, value)


def java_specification_version(spark: Any) -> str:
    """The Java version the driver's JVM implements (``"17"``, ``"21"``; ``"1.8"`` for Java 8)."""
    jvm = classic_jvm(spark, feature="java_specification_version", instead="")
    system = jvm_class(jvm, "java.lang.System")
    return str(system.getProperty("java.specification.version"))


def jvm_alive(spark: Any) -> bool:
    """Whether the driver JVM of a classic ``spark`` still answers (a native crash in local mode
    takes it down with the tasks). A Spark Connect session has no JVM of its own here: True."""
    from pyspark.sql.utils import is_remote

    jvm = None if is_remote() else getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:
        return True
    try:
        jvm.java.lang.System.currentTimeMillis()
    except Exception:  # noqa: BLE001 - any failure to reach the JVM means it is gone
        return False
    return True


def jvm_working_folder() -> str | None:
    """The working folder of the active classic session's JVM (where Spark's own writers resolve
    relative paths), or None without one."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    jvm = None if context is None else context._jvm
    return None if jvm is None else str(jvm.java.lang.System.getProperty("user.dir"))
