"""One local SparkSession with the mmlspark jar for the whole test run."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import mmlspark
from mmlspark.core.wrapper import MMLParams


@pytest.fixture(scope="session")
def spark():
    session = mmlspark.session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def generated_classes() -> list[type[MMLParams]]:
    """Every public wrapper class of every mmlspark area package."""
    found = {}
    for info in pkgutil.iter_modules(mmlspark.__path__):
        if info.name.startswith("_") or not info.ispkg or info.name in ("core", "jars"):
            continue
        module = importlib.import_module(f"mmlspark.{info.name}")
        for name in getattr(module, "__all__", []):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, MMLParams):
                found[cls._java_class_name] = cls
    return [found[k] for k in sorted(found)]
