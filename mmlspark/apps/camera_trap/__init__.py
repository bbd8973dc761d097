"""The camera-trap classification job: ``python -m mmlspark.apps.camera_trap --help``."""
