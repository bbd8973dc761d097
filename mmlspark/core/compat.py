"""The few pyspark Python APIs that differ between the Spark lines mmlspark supports.

Everything line-dependent on the Python side is named here, so the rest of the package imports
one name whatever the line.
"""

from __future__ import annotations

from typing import Any

import pyspark

__all__ = [
    "PYSPARK_LINE",
    "PythonEvalType",
    "connect_ml_supported",
    "remote_model_ref",
    "is_remote_model_ref",
]

PYSPARK_LINE: tuple[int, int] = tuple(int(x) for x in pyspark.__version__.split(".")[:2])  # type: ignore[assignment]

try:  # Spark 4.0 and newer
    from pyspark.util import PythonEvalType
except ImportError:  # Spark 3.5: in pyspark.rdd
    from pyspark.rdd import PythonEvalType  # type: ignore[import-not-found,no-redef]

try:  # Spark 4.1 and newer: a model fitted on a Spark Connect server is held by reference
    from pyspark.ml.util import RemoteModelRef

    _HAS_MODEL_REF = True
except ImportError:  # Spark 3.5 and 4.0
    _HAS_MODEL_REF = False


def connect_ml_supported() -> bool:
    """Whether this pyspark's Spark Connect client runs ML stages on the server."""
    return PYSPARK_LINE >= (4, 0)


def remote_model_ref(session: Any, ref_id: str) -> Any:
    """What a Python model holds as ``_java_obj`` for the server-side model `ref_id`: a
    RemoteModelRef (4.1 and newer, which frees the server's copy when dropped), or the id itself,
    registered with the client's ML cache (4.0, which frees it when the session stops)."""
    if _HAS_MODEL_REF:
        return RemoteModelRef(ref_id)
    session.client.add_ml_cache(ref_id)
    return ref_id


def is_remote_model_ref(value: Any) -> bool:
    """Whether `value` is a server-side model of a Spark Connect session (see remote_model_ref)."""
    if _HAS_MODEL_REF:
        return isinstance(value, RemoteModelRef)
    return isinstance(value, str)
