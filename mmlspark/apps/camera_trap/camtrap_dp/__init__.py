"""Camtrap DP 1.0 export of the camera-trap job's results (``export --format camtrap-dp``): the
data package GBIF and the camera-trap tools read, with the job's own copies of the standard's
table schemas (``*-schema.json``) for checking a package offline."""

from mmlspark.apps.camera_trap.camtrap_dp.export import export
from mmlspark.apps.camera_trap.camtrap_dp.package import (
    PACKAGE_FILES,
    PROFILE,
    TABLES,
    VERSION,
    local_descriptor,
    schema,
)

__all__ = ["PACKAGE_FILES", "PROFILE", "TABLES", "VERSION", "export", "local_descriptor", "schema"]
