"""Synth is pure configuration: importing the CDK app's modules loads no AWS SDK, no
Kubernetes client and no Powertools (the runtime's composition root stays out of infra)."""

from __future__ import annotations

import subprocess
import sys

from tests.infra.test_stack import REPO

RUNTIME_ONLY = {"boto3", "botocore", "kubernetes", "aws_lambda_powertools", "moto"}
SYNTH_MODULES = ("infra.stack", "infra.settings", "infra.nodescaler")


def loaded_by(*modules: str) -> set[str]:
    script = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(*sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    return {name.split(".")[0] for name in result.stdout.split()}


def test_importing_the_stack_loads_no_sdk_client_or_powertools() -> None:
    assert sorted(loaded_by(*SYNTH_MODULES) & RUNTIME_ONLY) == []


def test_the_check_sees_an_sdk_import() -> None:
    # Guards the guard: the runtime's composition root does load boto3.
    assert "boto3" in loaded_by("nodescaler.wiring")
