"""Runnable applications built on mmlspark (``python -m mmlspark.apps.<name>``)."""
