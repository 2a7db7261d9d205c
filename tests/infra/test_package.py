"""The construct as another CDK app uses it: typed settings, policies as objects or from a
folder, bad ones named; and installed from a wheel built from this repository, alone,
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
from nodescaler.adapters.deployed_policies import load_policies

from infra import DeploySettings, Nodescaler
from infra.settings import SettingsError
from tests.infra.test_stack import REPO

# What the wheel is built from (setuptools' find roots, the links in them, their targets).
SOURCES = ("pyproject.toml", "README.md", "layers", "tools", "infra", "functions")
PIP = (sys.executable, "-m", "pip", "-q", "--disable-pip-version-check")
POLICY = (REPO / "policies" / "web.yaml").read_text()
# Another team's app: typed settings, a policy as an object, nothing from this repo.
APP = f"""
import json, sys
import aws_cdk as cdk
import nodescaler, nodescaler_cdk
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler_cdk import DeploySettings, Nodescaler

app = cdk.App(context={{"aws:cdk:bundling-stacks": []}})
stack = cdk.Stack(app, "Platform")
policy = parse_policy({POLICY!r}, "web.yaml")
settings = DeploySettings(cluster_name="team-a", allowed_groups=["web"], drain_groups=["web"])
Nodescaler(stack, "Autoscaler", settings=settings, policies=[policy])
app.synth()
print(json.dumps([nodescaler.__file__, nodescaler_cdk.__file__, cdk.__file__]))
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


# Another aws-cdk-lib 2.x than the lock's, installed apart by `make test` from the
# hash-locked requirements/other-cdk.txt (tests reach no registry).
OTHER_CDK = REPO / "out" / "other-cdk"


def installed_app(tmp_path: Path, *before: Path) -> tuple[Path, Path]:
    """The wheel installed alone, the user's app run on it (`before`'s packages first on
    its path); the app's folder and the installed package's."""
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
    path = [str(site), *map(str, before), sysconfig.get_paths()["purelib"]]
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=app,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(path), "CDK_OUTDIR": str(app / "cdk.out")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # Given the package alone: the app imported the installed copies, not this repository's
    *imported, cdk_lib = json.loads(result.stdout.splitlines()[-1])
    assert all(Path(path).is_relative_to(site) for path in imported)
    assert Path(cdk_lib).is_relative_to(before[0] if before else sysconfig.get_paths()["purelib"])
    return app, site


def test_the_installed_construct_synthesizes_with_another_aws_cdk_lib(tmp_path: Path) -> None:
    if not (OTHER_CDK / "aws_cdk").is_dir():
        pytest.fail(f"no other aws-cdk-lib in {OTHER_CDK}: run make test", pytrace=False)
    installed = {p.name for p in OTHER_CDK.glob("aws_cdk_lib-*.dist-info")}
    assert installed and installed != {"aws_cdk_lib-2.275.0.dist-info"}  # not the lock's
    app, _ = installed_app(tmp_path, OTHER_CDK)
    outputs = json.loads((app / "cdk.out" / "Platform.template.json").read_text())["Outputs"]
    assert outputs["DeploymentName"]["Value"] == "nodescaler-team-a"
    assert set(outputs["StateTableName"]["Value"]) == {"Ref"}


def test_the_installed_construct_builds_the_functions_from_its_own_package(
    tmp_path: Path,
) -> None:
    app, site = installed_app(tmp_path)
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


def test_settings_given_typed_are_the_settings_cdk_json_would_give() -> None:
    settings = DeploySettings(cluster_name="team-a", allowed_groups=["*"], tick_minutes=2)
    built = construct(settings=settings, policies_folder=REPO / "policies")
    assert built.settings == DeploySettings.model_validate(
        {"clusterName": "team-a", "allowedGroups": ["*"], "tickMinutes": 2}
    )
    assert built.policies == load_policies(REPO / "policies")


def test_policies_given_as_objects_are_written_as_the_documents_the_layer_carries() -> None:
    policies = load_policies(REPO / "policies")
    settings = DeploySettings(cluster_name="team-a", allowed_groups=["team-a-*"])
    built = construct(settings=settings, policies=policies.values())
    assert load_policies(built.policies_folder) == policies


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"settings": {"clusterName": "team-a"}},
            "Nodescaler: settings: is dict, not DeploySettings",
        ),
        (
            {"settings": DeploySettings()},
            "Nodescaler: settings.clusterName: is empty, but policies microservices",
        ),
    ],
)
def test_bad_construct_arguments_are_named(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        construct(policies_folder=REPO / "policies", **arguments)
    assert str(caught.value).startswith(message)


def test_given_settings_as_keywords_then_python_refuses_them_as_a_type_checker_would() -> None:
    # typed props: a misspelt or loose setting fails where it is written, not deep in synth
    with pytest.raises(TypeError, match="cluster_name"):
        construct(cluster_name="team-a", policies_folder=REPO / "policies")
