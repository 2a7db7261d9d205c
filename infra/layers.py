"""The Lambda layers, built on this machine without Docker (CDK local bundling).

- dependencies: the pinned wheels of `layers/deps/requirements.txt` for Lambda's arm64
  platform (pip `--platform`, binary wheels only, hashes required);
- kubernetes: the same for `layers/kubernetes/requirements.txt`, for functions that read
  a cluster;
- runtime: the `nodescaler` package synth imports (layers/core/python in this repository,
  the installed one when the construct is used from another app);
- policies: the policy documents, at /opt/policies where the functions read them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsii
import nodescaler
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

# The requirements files, shipped with the package (links to the repository's layers/).
ASSETS = Path(__file__).parent / "assets"
RUNTIME_PACKAGE = Path(nodescaler.__file__).resolve().parent
RUNTIME = lambda_.Runtime.PYTHON_3_14  # the newest Python this aws-cdk-lib offers
ARCHITECTURE = lambda_.Architecture.ARM_64  # cheaper per GB-second, and our wheels exist for it
PLATFORM = "manylinux2014_aarch64"
# Local bundling never falls back to Docker: a failed build stops synth instead.
NO_DOCKER = DockerImage.from_registry("nodescaler/local-bundling-only")
# Every AWS service the functions call (see nodescaler.wiring.AwsClients).
AWS_SERVICES = frozenset(
    {
        "arc-zonal-shift",  # zonal shifts and autoshifts in force
        "autoscaling",
        "cloudwatch",
        "dynamodb",
        "ec2",
        "eks",
        "events",  # scaling events
        "lambda",
        "secretsmanager",  # a Prometheus metric's bearer token; a cluster outside EKS
        "sqs",
        "sts",
    }
)


@jsii.implements(ILocalBundling)
class PipInstall:
    """Installs a hash-pinned requirements file for Lambda's platform into `python/`."""

    def __init__(
        self, requirements: Path, python_version: str, keep_services: frozenset[str] | None = None
    ) -> None:
        self.requirements = requirements
        self.python_version = python_version
        self.keep_services = keep_services

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        command = [
            sys.executable,
            *("-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--require-hashes", "--no-deps", "--only-binary=:all:"),
            # Bytecode pip would write is for the Python running synth, which Lambda's runtime
            # ignores (and can't replace: /opt is read-only): dead weight in the layer.
            "--no-compile",
            *("--platform", PLATFORM, "--implementation", "cp"),
            *("--python-version", self.python_version),
            *("--target", str(Path(output_dir) / "python")),
            *("-r", str(self.requirements)),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"building the dependencies layer from {self.requirements} failed:\n{result.stderr}"
            )
        if self.keep_services is not None:
            prune_botocore(Path(output_dir) / "python" / "botocore" / "data", self.keep_services)
        return True


def prune_botocore(data: Path, keep: frozenset[str]) -> None:
    """botocore carries the models of 400+ services (28 MB); keep the ones we call."""
    for service in data.iterdir():
        if service.is_dir() and service.name not in keep:
            shutil.rmtree(service)


@jsii.implements(ILocalBundling)
class CopyPackage:
    """Copies a Python package into `<output>/python/`, where Lambda's runtime finds it."""

    def __init__(self, package: Path) -> None:
        self.package = package

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        shutil.copytree(
            self.package,
            Path(output_dir) / "python" / self.package.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        return True


@jsii.implements(ILocalBundling)
class CopyInto:
    """Copies a folder's YAML files into `<output>/<name>/`."""

    def __init__(self, source: Path, name: str) -> None:
        self.source = source
        self.name = name

    def try_bundle(self, output_dir: str, *_: Any, **__: Any) -> bool:
        target = Path(output_dir) / self.name
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.source.iterdir()):
            if path.suffix in (".yaml", ".yml") and path.is_file():
                shutil.copy2(path, target / path.name)
        return True


def _bundled(source: Path, local: ILocalBundling, **options: Any) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(source.resolve()), bundling=BundlingOptions(image=NO_DOCKER, local=local), **options
    )


class Layers(Construct):
    POLICIES_PATH = "/opt/policies"  # where the policies layer puts the documents

    def __init__(self, scope: Construct, construct_id: str, *, policies_folder: Path) -> None:
        super().__init__(scope, construct_id)
        python_version = RUNTIME.name.removeprefix("python")
        common: dict[str, Any] = {
            "compatible_runtimes": [RUNTIME],
            "compatible_architectures": [ARCHITECTURE],
        }
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=_bundled(
                ASSETS / "deps",
                PipInstall(ASSETS / "deps" / "requirements.txt", python_version, AWS_SERVICES),
            ),
            description="nodescaler: pinned third-party packages (pydantic, Powertools, boto3...)",
            **common,
        )
        self.runtime = lambda_.LayerVersion(
            self,
            "Runtime",
            code=_bundled(
                RUNTIME_PACKAGE,
                CopyPackage(RUNTIME_PACKAGE),
                exclude=["**/__pycache__", "**/*.pyc"],
            ),
            description="nodescaler: the autoscaler package",
            **common,
        )
        self.kubernetes = lambda_.LayerVersion(
            self,
            "Kubernetes",
            code=_bundled(
                ASSETS / "kubernetes",
                PipInstall(ASSETS / "kubernetes" / "requirements.txt", python_version),
            ),
            description="nodescaler: the Kubernetes client, for functions that read a cluster",
            **common,
        )
        self.policies = lambda_.LayerVersion(
            self,
            "Policies",
            code=_bundled(policies_folder, CopyInto(policies_folder, "policies")),
            description="nodescaler: the policy documents",
            **common,
        )

    def for_function(self, *, kubernetes: bool) -> list[lambda_.ILayerVersion]:
        """Only functions that read a cluster carry the Kubernetes client."""
        extra = [self.kubernetes] if kubernetes else []
        return [self.dependencies, *extra, self.runtime, self.policies]
