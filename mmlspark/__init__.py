"""mmlspark: deep learning and image processing stages for Spark ML.

>>> import mmlspark
>>> spark = mmlspark.session()               # local Spark with the bundled jar
>>> conf = mmlspark.spark_conf()             # the settings that load mmlspark anywhere
"""

from mmlspark._version import (
    __version__,
    onnxruntime_version,
    pyspark_requirement,
    scala_version,
    spark_lines,
    spark_version,
)
from mmlspark.core.backend import BackendDecision, backend_decision, get_backend, set_backend
from mmlspark.core.persistence import install_pipeline_persistence, load_pipeline, save_pipeline
from mmlspark.core.session import (
    UnsupportedSparkError,
    VersionMismatchError,
    check_bundled_jar,
    jar_path,
    session,
    spark_conf,
    spark_line,
)

check_bundled_jar()
install_pipeline_persistence()

__all__ = [
    "__version__",
    "scala_version",
    "spark_version",
    "spark_lines",
    "pyspark_requirement",
    "onnxruntime_version",
    "session",
    "spark_conf",
    "spark_line",
    "jar_path",
    "VersionMismatchError",
    "UnsupportedSparkError",
    "set_backend",
    "get_backend",
    "backend_decision",
    "BackendDecision",
    "save_pipeline",
    "load_pipeline",
]
