"""mmlspark: deep learning and image processing stages for Spark ML.

>>> import mmlspark
>>> spark = mmlspark.session()               # local Spark with the bundled jar
>>> conf = mmlspark.spark_conf()             # the settings that load mmlspark anywhere
"""

from mmlspark._version import __version__, onnxruntime_version, scala_version, spark_version
from mmlspark.core.session import (
    VersionMismatchError,
    check_bundled_jar,
    jar_path,
    session,
    spark_conf,
)

check_bundled_jar()

__all__ = [
    "__version__",
    "scala_version",
    "spark_version",
    "onnxruntime_version",
    "session",
    "spark_conf",
    "jar_path",
    "VersionMismatchError",
]
