"""The construct as another CDK app uses it: settings as keywords, policies as objects or
from a folder, bad ones named; and installed from a wheel built from this repository, alone,
it builds nodescaler from its own copy of the handlers and layers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import aws_cdk as cdk
import pytest
from nodescaler.adapters.policy_files import load_policies

from infra import DeploySettings, Nodescaler
from infra.settings import SettingsError
from tests.infra.test_stack import REPO

# What the wheel is built from (setuptools' find roots, the links in them, their targets).
SOURCES = ("pyproject.toml", "README.md", "layers", "tools", "infra", "functions")
PIP = (sys.executable, "-m", "pip", "-q", "--disable-pip-version-check")
POLICY = (REPO / "policies" / "web.yaml").read_text()
# Another team's app: settings as keywords, a policy as an object, nothing from this repo.
APP = f"""
import json, sys
import aws_cdk as cdk
import nodescaler, nodescaler_cdk
from nodescaler.domain.documents import parse_policy
from nodescaler_cdk import Nodescaler

app = cdk.App(context={{"aws:cdk:bundling-stacks": []}})
stack = cdk.Stack(app, "Platform")
policy = parse_policy({POLICY!r}, "web.yaml")
Nodescaler(stack, "Autoscaler", cluster_name="team-a", drain_groups=["web"], policies=[policy])
app.synth()
print(json.dumps([nodescaler.__file__, nodescaler_cdk.__file__]))
"""


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():  # the links kept as links, as a checkout has them
            shutil.copytree(
                REPO / name,
                source / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            shutil.copy2(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            *PIP,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("nodescaler-*.whl")
    return wheel


def test_the_installed_construct_builds_the_functions_from_its_own_package(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [*PIP, "install", "--no-deps", "--target", str(site), str(build_wheel(tmp_path))],
        check=True,
        capture_output=True,
        timeout=300,
    )
    app = tmp_path / "app"
    app.mkdir()
    (app / "app.py").write_text(APP)
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=app,
        env=os.environ
        | {
            "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]]),
            "CDK_OUTDIR": str(app / "cdk.out"),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # Given the package alone: the app imported the installed copies, not this repository's
    imported = json.loads(result.stdout.splitlines()[-1])
    assert all(Path(path).is_relative_to(site) for path in imported)

    out = app / "cdk.out"
    template = json.loads((out / "Platform.template.json").read_text())
    resources = template["Resources"].values()
    functions = [r for r in resources if r["Type"] == "AWS::Lambda::Function"]
    handlers = {
        (out / f"asset.{Path(f['Properties']['Code']['S3Key']).stem}" / "handler.py").read_text()
        for f in functions
    }
    # Then each function's code is the installed package's handler
    assert len(functions) == 5
    assert handlers == {
        (site / "nodescaler_cdk" / "assets" / "functions" / name / "handler.py").read_text()
        for name in ("dispatch", "evaluate", "drain", "terminate", "fast_path")
    }
    (hook,) = [r for r in resources if r["Type"] == "AWS::AutoScaling::LifecycleHook"]
    assert hook["Properties"]["LifecycleHookName"] == "nodescaler-team-a-drain"


def construct(**arguments: object) -> Nodescaler:
    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    return Nodescaler(cdk.Stack(app, "Platform"), "Autoscaler", **arguments)


def test_settings_given_as_keywords_are_the_settings_cdk_json_would_give() -> None:
    built = construct(cluster_name="team-a", tick_minutes=2, policies_folder=REPO / "policies")
    assert built.settings == DeploySettings(cluster_name="team-a", tick_minutes=2)
    assert built.policies == load_policies(REPO / "policies")


def test_policies_given_as_objects_are_written_as_the_documents_the_layer_carries() -> None:
    policies = load_policies(REPO / "policies")
    built = construct(settings=DeploySettings(cluster_name="team-a"), policies=policies.values())
    assert load_policies(built.policies_folder) == policies


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"cluster_name": "team-a", "tick_minutes": 0},
            "Nodescaler: tick_minutes: Input should be",
        ),
        ({"cluster_name": "team-a", "tick": 2}, "Nodescaler: tick: unknown field"),
        (
            {"settings": DeploySettings(), "cluster_name": "team-a"},
            "Nodescaler: settings= and keywords (cluster_name) given together",
        ),
        ({}, "Nodescaler: settings.clusterName: is empty, but policies microservices"),
    ],
)
def test_bad_construct_arguments_are_named(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        construct(policies_folder=REPO / "policies", **arguments)
    assert str(caught.value).startswith(message)
