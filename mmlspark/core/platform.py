"""Where the code runs, under the names SynapseML's notebooks import from
``synapse.ml.core.platform`` (``from mmlspark.core.platform import *`` works the same way), so a
notebook written for it runs with its imports changed.

Each ``running_on_*`` function reads the environment its platform sets for every process of a
cluster, so it gives the same answer on the driver and in a worker:

- Databricks: ``DATABRICKS_RUNTIME_VERSION``;
- Azure Synapse: ``AZURE_SERVICE`` naming Synapse's Spark service (``Microsoft.ProjectArcadia``);
- Microsoft Fabric's Python notebooks: ``FABRIC_RUNTIME_VERSION`` without a Spark session;
- Binder: ``BINDER_LAUNCH_HOST`` or ``BINDER_REPO_URL``.

``find_secret`` reads a secret from Databricks' secret scopes where it runs there, else from an
environment variable of the secret's name.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "PLATFORM_BINDER",
    "PLATFORM_DATABRICKS",
    "PLATFORM_FABRIC_PYTHON",
    "PLATFORM_SYNAPSE",
    "PLATFORM_SYNAPSE_INTERNAL",
    "PLATFORM_UNKNOWN",
    "current_platform",
    "find_secret",
    "materializing_display",
    "running_on_binder",
    "running_on_databricks",
    "running_on_fabric_python",
    "running_on_synapse",
    "running_on_synapse_internal",
]

PLATFORM_SYNAPSE_INTERNAL = "synapse_internal"
PLATFORM_SYNAPSE = "synapse"
PLATFORM_FABRIC_PYTHON = "fabric_python_env"
PLATFORM_BINDER = "binder"
PLATFORM_DATABRICKS = "databricks"
PLATFORM_UNKNOWN = "unknown"

#: The value of AZURE_SERVICE in an Azure Synapse Spark pool's processes.
_SYNAPSE_SERVICE = "Microsoft.ProjectArcadia"


def current_platform() -> str:
    """One of the PLATFORM_* names: the platform this process runs on."""
    env = os.environ
    if env.get("DATABRICKS_RUNTIME_VERSION"):
        return PLATFORM_DATABRICKS
    if env.get("AZURE_SERVICE") == _SYNAPSE_SERVICE:
        # Synapse inside Fabric: the same service, with the Fabric runtime's version set too.
        internal = bool(env.get("FABRIC_RUNTIME_VERSION") or env.get("TRIDENT_RUNTIME_VERSION"))
        return PLATFORM_SYNAPSE_INTERNAL if internal else PLATFORM_SYNAPSE
    if env.get("FABRIC_RUNTIME_VERSION"):
        return PLATFORM_FABRIC_PYTHON
    if env.get("BINDER_LAUNCH_HOST") or env.get("BINDER_REPO_URL"):
        return PLATFORM_BINDER
    return PLATFORM_UNKNOWN


def running_on_synapse_internal() -> bool:
    return current_platform() == PLATFORM_SYNAPSE_INTERNAL


def running_on_synapse() -> bool:
    return current_platform() == PLATFORM_SYNAPSE


def running_on_fabric_python() -> bool:
    return current_platform() == PLATFORM_FABRIC_PYTHON


def running_on_binder() -> bool:
    return current_platform() == PLATFORM_BINDER


def running_on_databricks() -> bool:
    return current_platform() == PLATFORM_DATABRICKS


def find_secret(secret_name: str, keyvault: str | None = None) -> str:
    """The secret `secret_name`: on Databricks from the secret scope `keyvault`
    (``dbutils.secrets.get``), elsewhere from the environment variable of that name. Raises
    KeyError, naming both places, where neither has it."""
    if running_on_databricks() and keyvault:
        dbutils = _notebook_global("dbutils")
        if dbutils is not None:
            return str(dbutils.secrets.get(scope=keyvault, key=secret_name))
    value = os.environ.get(secret_name)
    if value is None:
        where = f"the Databricks secret scope {keyvault!r} or " if keyvault else ""
        raise KeyError(
            f"find_secret: no secret {secret_name!r} in {where}the environment variable "
            f"{secret_name}; set it there"
        )
    return value


def materializing_display(data: Any) -> None:
    """Shows a DataFrame with the notebook's ``display`` where there is one (Databricks,
    Synapse, Fabric), else with ``DataFrame.show()``; either way its rows are computed."""
    display = _notebook_global("display")
    if display is not None and current_platform() != PLATFORM_UNKNOWN:
        display(data)
    elif hasattr(data, "show"):
        data.show()
    else:
        print(data)


def _notebook_global(name: str) -> Any:
    """A name the notebook's kernel put in its user namespace (dbutils, display), or None."""
    try:
        from IPython import get_ipython  # type: ignore[attr-defined]
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns.get(name)
