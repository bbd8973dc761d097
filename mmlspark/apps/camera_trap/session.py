"""The job's Spark session, and how it names the paths it is given."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

import mmlspark
from mmlspark.core.backend import files_in_python
from mmlspark.core.jvm import qualified_path

#: Spark's logging at the CLI's default verbosity: errors only (see the file).
QUIET_LOGGING = Path(mmlspark.__file__).parent / "resources" / "log4j2-quiet.properties"


#: Where the local JVM's own console output goes at the CLI's default verbosity: the package
#: resolution's lines, the JVM's warnings and anything native libraries print (-v: the console).
JVM_CONSOLE = Path(tempfile.gettempdir()) / f"mmlspark-camera-trap-{os.getuid()}-jvm.log"
JVM_CONSOLE_LIMIT = 16 * 2**20


@contextlib.contextmanager
def _jvm_console(log: Path) -> Iterator[None]:
    """Points this process's standard output and error at `log` while the JVM is launched, which
    inherits them for its whole life; this process's own are back when the block ends. A JVM
    that fails to start leaves its words in the error."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        # Appended to (runs at once share it), started afresh once it is large.
        fresh = log.exists() and log.stat().st_size > JVM_CONSOLE_LIMIT
        with open(log, "wb" if fresh else "ab") as sink:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
        yield
    except Exception as error:
        raise RuntimeError(f"{error}\n(the JVM's output, {log}):\n{_tail(log)}") from error
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(unreadable)"


def spark_session(
    master: str | None,
    remote: str | None = None,
    backend: str | None = None,
    verbose: bool = True,
) -> SparkSession:
    """Local Spark unless told otherwise; under spark-submit, the session it configured; with
    `remote`, a Spark Connect session. `backend` (auto, jvm, python) is where the stages run.
    Unless `verbose`, a local session shows no stage bars, logs only Spark's errors and sends its
    JVM's own console output to `JVM_CONSOLE`, and a classic session's log level is ERROR, so that
    the console holds the job's own lines."""
    if backend is not None:
        mmlspark.set_backend(backend)
    if remote is not None:
        return SparkSession.builder.remote(remote).appName("mmlspark-camera-trap").getOrCreate()
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:  # launched by spark-submit
        spark = SparkSession.builder.getOrCreate()
    else:
        quiet = {
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={QUIET_LOGGING}",
        }
        with contextlib.nullcontext() if verbose else _jvm_console(JVM_CONSOLE):
            spark = mmlspark.session(
                master or "local[*]", {} if verbose else quiet, app_name="mmlspark-camera-trap"
            )
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def _qualified(spark: SparkSession, path: str) -> str:
    """The path as Spark reports file paths (`file:/...` for local ones), without a trailing /.
    Without the jar a path without a scheme is taken as a local one, made absolute here (a Spark
    Connect server resolves relative paths from its own folder)."""
    if not files_in_python(spark):
        return qualified_path(spark, path)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path):
        return path.rstrip("/")
    return "file:" + os.path.abspath(path).rstrip("/")


def _cancel_all(spark: SparkSession) -> None:
    """Cancels the session's running Spark jobs."""
    from pyspark.sql.utils import is_remote

    if is_remote():
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()
