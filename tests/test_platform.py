"""mmlspark.core.platform: the names SynapseML's notebooks import from synapse.ml.core.platform,
each platform recognised by the environment its processes get."""

from __future__ import annotations

import pytest

import mmlspark.core.platform as platform

PLATFORM_VARIABLES = (
    "DATABRICKS_RUNTIME_VERSION",
    "AZURE_SERVICE",
    "FABRIC_RUNTIME_VERSION",
    "TRIDENT_RUNTIME_VERSION",
    "BINDER_LAUNCH_HOST",
    "BINDER_REPO_URL",
)


@pytest.fixture
def bare(monkeypatch):
    for name in PLATFORM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("environment", "expected", "check"),
    [
        ({}, "unknown", None),
        ({"DATABRICKS_RUNTIME_VERSION": "17.3"}, "databricks", "running_on_databricks"),
        ({"AZURE_SERVICE": "Microsoft.ProjectArcadia"}, "synapse", "running_on_synapse"),
        (
            {"AZURE_SERVICE": "Microsoft.ProjectArcadia", "FABRIC_RUNTIME_VERSION": "1.3"},
            "synapse_internal",
            "running_on_synapse_internal",
        ),
        ({"FABRIC_RUNTIME_VERSION": "1.3"}, "fabric_python_env", "running_on_fabric_python"),
        ({"BINDER_LAUNCH_HOST": "binder-launch-host"}, "binder", "running_on_binder"),
        ({"AZURE_SERVICE": "SomethingElse"}, "unknown", None),
    ],
)
def test_each_platform_is_recognised_by_its_environment(bare, environment, expected, check):
    for name, value in environment.items():
        bare.setenv(name, value)
    assert platform.current_platform() == expected
    checks = [n for n in platform.__all__ if n.startswith("running_on_")]
    assert len(checks) == 5
    assert [n for n in checks if getattr(platform, n)()] == ([check] if check else [])


def test_a_notebook_s_star_import_gets_the_functions_and_secrets_come_from_the_environment(
    bare, capsys
):
    names: dict = {}
    exec("from mmlspark.core.platform import *", names)
    assert {"running_on_synapse", "running_on_databricks", "find_secret"} <= names.keys()
    bare.setenv("MY_SERVICE_KEY", "s3cret")
    assert names["find_secret"]("MY_SERVICE_KEY", "my-vault") == "s3cret"
    with pytest.raises(KeyError, match="no secret 'OTHER_KEY'.*environment variable OTHER_KEY"):
        names["find_secret"]("OTHER_KEY")

    class Frame:
        def show(self):
            print("shown")

    names["materializing_display"](Frame())
    assert capsys.readouterr().out == "shown\n"
