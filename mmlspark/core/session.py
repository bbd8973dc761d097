"""Finding the bundled jar, the Spark settings that load it, and local sessions."""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmlspark._engine.ort import ENVIRONMENT as ORT_ENVIRONMENT
from mmlspark._version import (
    __version__,
    onnxruntime_version,
    pyspark_requirement,
    spark_lines,
)

__all__ = [
    "jar_path",
    "spark_conf",
    "session",
    "require_jvm_library",
    "spark_line",
    "VersionMismatchError",
    "UnsupportedSparkError",
]

_JARS_DIR = Path(__file__).resolve().parent.parent / "jars"
_checked_contexts: set[int] = set()


class VersionMismatchError(ImportError):
    """The Python package and the mmlspark jar come from different builds."""


class UnsupportedSparkError(VersionMismatchError):
    """A Spark line that no jar of this package is built for."""


def _supported() -> str:
    return f"Spark {', '.join(spark_lines)} (pyspark{pyspark_requirement})"


def spark_line(spark_version: str | None = None) -> str:
    """The Spark line (``major.minor``) of `spark_version`, by default of the installed pyspark;
    fails with :class:`UnsupportedSparkError`, naming the supported lines, for any other line."""
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    line = ".".join(spark_version.split(".")[:2])
    if line not in spark_lines:
        raise UnsupportedSparkError(
            f"mmlspark {__version__} runs on {_supported()}, not on Spark {spark_version}; "
            "install a supported pyspark, or an mmlspark release built for your Spark"
        )
    return line


def _bundled_jars(scala: str = "*") -> list[Path]:
    return sorted(_JARS_DIR.glob(f"repo/mmlspark/mmlspark_{scala}/*/mmlspark_{scala}-*.jar"))


def _jar_version(jar: Path) -> str:
    with zipfile.ZipFile(jar) as zf:
        text = zf.read("mmlspark/build.properties").decode("utf-8")
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return props.get("version", "unknown")


def check_bundled_jar() -> None:
    """Fails if the jars shipped next to this package were built from another version, or if
    one Scala version has several."""
    for scala in sorted(set(spark_lines.values())):
        jars = _bundled_jars(scala)
        if len(jars) > 1:
            raise VersionMismatchError(
                f"mmlspark {__version__}: found several Scala {scala} jars in {_JARS_DIR}: "
                f"{', '.join(j.name for j in jars)}; reinstall mmlspark so only one is left"
            )
        if jars:
            jar_version = _jar_version(jars[0])
            if jar_version != __version__:
                raise VersionMismatchError(
                    f"mmlspark Python package is version {__version__} but its jar "
                    f"{jars[0].name} is version {jar_version}; reinstall mmlspark (or rebuild "
                    "with 'make wheel')"
                )


def jar_path(spark_version: str | None = None) -> str:
    """Path of the bundled mmlspark jar for `spark_version` (by default the installed
    pyspark's): the Scala 2.12 jar for Spark 3.5, the Scala 2.13 jar for Spark 4.x."""
    line = spark_line(spark_version)
    scala = spark_lines[line]
    jars = _bundled_jars(scala)
    if not jars:
        raise FileNotFoundError(
            f"mmlspark {__version__}: no Scala {scala} jar (for Spark {line}) in {_JARS_DIR}. "
            "Install the wheel (pip install mmlspark-*.whl) or, in a source checkout, run "
            "'make jar'"
        )
    return str(jars[0])


def _packages(scala: str) -> list[str]:
    listing = _JARS_DIR / f"packages_{scala}.txt"
    if not listing.is_file():
        return []
    return [line.strip() for line in listing.read_text().splitlines() if line.strip()]


_LIST_SETTINGS = ("spark.jars.packages", "spark.jars.repositories", "spark.jars.excludes")

# ONNX Runtime's CPU and GPU builds: same API, same version, one or the other on a classpath.
_ORT_CPU = "com.microsoft.onnxruntime:onnxruntime"
_ORT_GPU = "com.microsoft.onnxruntime:onnxruntime_gpu"


def spark_conf(*, gpu: bool = False, spark_version: str | None = None) -> dict[str, str]:
    """Spark settings that load mmlspark: its jar and JVM dependencies, as Maven packages.

    The jar is served from a small Maven repository inside this package
    (``spark.jars.repositories``); Spark resolves it and its dependencies (OpenCV) from
    ``spark.jars.packages`` when the session starts, downloading the dependencies from Maven
    Central once and caching them, and ships every jar to the executors. Pass the settings
    to ``SparkSession.builder.config(map=...)`` or ``spark-submit --conf``; if you set
    ``spark.jars.packages`` or ``spark.jars.repositories`` yourself, join the lists with
    commas. The executors get ``ORT_ENVIRONMENT`` (ONNX Runtime's telemetry files off). With
    ``gpu=True`` ONNX Runtime's GPU build (``onnxruntime_gpu``, CUDA 12 and cuDNN 9
    on the executors) replaces the CPU build. On a cluster without network access use the
    self-contained jar (``make jar``
    writes it to ``dist/``) with ``--jars`` instead.

    The jar is the one built for `spark_version`, by default the installed pyspark's: pass the
    cluster's Spark version when it differs from the local pyspark.
    """
    scala = spark_lines[spark_line(spark_version)]
    jar_path(spark_version)  # fails clearly when the jar is missing
    conf = {
        "spark.jars.packages": ",".join(_packages(scala)),
        "spark.jars.repositories": (_JARS_DIR / "repo").as_uri(),
        **{f"spark.executorEnv.{name}": value for name, value in ORT_ENVIRONMENT.items()},
    }
    if gpu:
        conf["spark.jars.packages"] += f",{_ORT_GPU}:{onnxruntime_version}"
        conf["spark.jars.excludes"] = _ORT_CPU
    return conf


def session(
    master: str = "local[*]",
    conf: Mapping[str, Any] | None = None,
    *,
    app_name: str = "mmlspark",
    gpu: bool = False,
    **settings: Any,
) -> Any:
    """Starts (or returns) a local SparkSession with mmlspark loaded.

    Parameters
    ----------
    master : str
        Spark master URL; ``local[*]`` uses every core of this machine.
    conf : mapping, optional
        Extra Spark settings, e.g. ``{"spark.sql.shuffle.partitions": "4"}``.
    app_name : str
        The application name shown by Spark.
    gpu : bool
        Load ONNX Runtime's GPU build instead of the CPU build (see :func:`spark_conf`).

    A local master's JVM gets a quarter of this machine's memory (1 to 16 GiB) unless
    ``spark.driver.memory`` is given (see :func:`default_driver_memory`); a JVM that is already
    running keeps its heap.

    Python workers run the interpreter that calls this unless ``PYSPARK_PYTHON`` is set.
    **settings
        More Spark settings, for names that are valid Python identifiers.

    Examples
    --------
    >>> import mmlspark
    >>> spark = mmlspark.session("local[2]", {"spark.ui.enabled": "false"})
    >>> spark.range(3).count()
    3
    """
    from pyspark.sql import SparkSession

    settings = {**dict(conf or {}), **settings}
    merged: dict[str, Any] = {**spark_conf(gpu=gpu)}
    for key, value in settings.items():
        if key in _LIST_SETTINGS and value and key in merged:
            merged[key] = f"{merged[key]},{value}"
        else:
            merged[key] = value
    # Python workers (UDFs) run this interpreter and its packages unless PYSPARK_PYTHON says
    # otherwise (pyspark itself would start whatever `python3` is first on the PATH).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for name, value in ORT_ENVIRONMENT.items():  # the driver's JVM and local workers inherit it
        os.environ.setdefault(name, value)
    if "spark.driver.memory" not in merged and master.startswith("local"):
        heap = default_driver_memory()
        if heap:
            merged["spark.driver.memory"] = heap
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in merged.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    require_jvm_library(spark.sparkContext)
    return spark


def default_driver_memory() -> str | None:
    """The heap a local session's JVM gets unless told: a quarter of this machine's memory,
    between 1 and 16 GiB (Spark's own default, 1 GiB, holds two 10 MP photos at a time at
    most). In local mode the driver's JVM runs every task, so its heap bounds the largest image
    mmlspark decodes (``spark.mmlspark.image.maxPixels``). None where the size is unknown."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    mib = min(max(physical // 4 // 2**20, 1024), 16 * 1024)
    return f"{mib}m"


def require_jvm_library(sc: Any) -> None:
    """Fails with a clear message unless the JVM of ``sc`` has the matching mmlspark jar."""
    if sc is None:
        raise RuntimeError(
            "mmlspark stages need a running Spark session: start one with mmlspark.session(), "
            "or add mmlspark.spark_conf() to your session's settings"
        )
    if id(sc) in _checked_contexts:
        return
    from mmlspark.core.jvm import classic_jvm, jvm_class

    jvm = classic_jvm(sc, feature="mmlspark's JVM stages", instead="see mmlspark.spark_conf()")
    build_info = jvm_class(jvm, "mmlspark.core.BuildInfo")
    try:
        jvm_version = build_info.version()
    except Exception:  # py4j answers a missing class with a JavaPackage that cannot be called
        raise RuntimeError(
            "the mmlspark jar is not on this Spark session's classpath; create the session with "
            "mmlspark.session(), or add the settings of mmlspark.spark_conf() "
            "(spark.jars.packages, spark.jars.repositories) before the session starts"
        ) from None
    if jvm_version != __version__:
        raise VersionMismatchError(
            f"mmlspark Python package is version {__version__} but the Spark session loaded "
            f"mmlspark jar version {jvm_version}; use the jar of the installed package "
            "(mmlspark.spark_conf()) or install the matching Python package"
        )
    line = spark_line(sc.version)
    jvm_scala = ".".join(build_info.scalaVersion().split(".")[:2])
    if jvm_scala != spark_lines[line]:
        raise VersionMismatchError(
            f"this Spark session runs Spark {sc.version}, which needs mmlspark's Scala "
            f"{spark_lines[line]} jar, but it loaded the Scala {jvm_scala} jar (built for Spark "
            f"{build_info.sparkVersion()}); start the session with mmlspark.session() or "
            f"mmlspark.spark_conf(spark_version='{sc.version}')"
        )
    _checked_contexts.add(id(sc))


# The default parallelism of Spark Connect sessions, by session id (asked once each).
_CONNECT_PARALLELISM: dict[str, int] = {}


def default_parallelism(spark: Any) -> int:
    """The session's default parallelism (the cluster's cores, as Spark counts them). Over Spark
    Connect, which does not expose it, the setting, else the number of partitions Spark gives a
    ``range`` (which it splits into that many), asked once per session."""
    from pyspark.sql.utils import is_remote

    if not is_remote():
        return int(spark.sparkContext.defaultParallelism)
    key = str(spark.session_id)
    if key not in _CONNECT_PARALLELISM:
        setting = spark.conf.get("spark.default.parallelism", None)
        if setting:
            _CONNECT_PARALLELISM[key] = int(setting)
        else:
            parts = "SELECT spark_partition_id() AS p FROM range(0, 1000000)"
            row = spark.sql(f"SELECT max(p) + 1 AS n FROM ({parts})").first()
            _CONNECT_PARALLELISM[key] = int(row["n"])
    return _CONNECT_PARALLELISM[key]
