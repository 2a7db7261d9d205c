"""The real CDK CLI (from the pinned npm package) on the sample configuration, layers built
without Docker; and a bad cdk.json value or policy failing it with the clear message."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.alarms import ALARMS_GO_NOWHERE
from infra.layers import AWS_SERVICES

REPO = Path(__file__).resolve().parents[2]
CDK = REPO / "node_modules" / ".bin" / "cdk"
SAMPLE = json.loads((REPO / "cdk.json").read_text())
# No notices, no telemetry, no version reporting: nothing leaves the machine but PyPI.
QUIET = ["--no-notices", "--no-version-reporting", "--ci"]


def cdk_synth(cwd: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return cdk(cwd, "synth", "--quiet", "--output", str(out))


def cdk(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CDK), *arguments, *QUIET],
        cwd=cwd,
        env=os.environ
        | {
            "CDK_DISABLE_CLI_TELEMETRY": "true",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def project_with(tmp_path: Path, **context: Any) -> Path:
    """A folder whose cdk.json runs this repo's app with the sample context, changed."""
    folder = tmp_path / "project"
    folder.mkdir()
    config = {
        "app": f"{REPO / '.venv' / 'bin' / 'python'} {REPO / 'app.py'}",
        "context": {"nodescaler": SAMPLE["context"]["nodescaler"] | context},
    }
    (folder / "cdk.json").write_text(json.dumps(config))
    return folder


def test_cdk_synth_builds_the_sample_with_its_layers_and_no_nag_findings(tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    result = cdk_synth(REPO, out)
    assert result.returncode == 0, result.stderr
    # cdk.json sets every recommended feature flag: the CLI has none to warn of
    assert "feature flags are not configured" not in result.stdout + result.stderr
    # The sample sends its alarms nowhere: said once, in words, with no jsii trace before it.
    assert result.stderr.count(f"WARNING {ALARMS_GO_NOWHERE}") == 1
    assert "program.js" not in result.stderr
    template = json.loads((out / "nodescaler-my-cluster.template.json").read_text())
    assert any(r["Type"] == "AWS::Scheduler::Schedule" for r in template["Resources"].values())
    assets = list(out.glob("asset.*"))
    # the dependencies layer: wheels for Lambda's arm64 Python 3.14, not this machine's
    (core,) = list(out.glob("asset.*/python/pydantic_core/_pydantic_core.cpython-314-*"))
    assert "aarch64" in core.name
    assert any((a / "python" / "nodescaler" / "wiring" / "evaluate.py").exists() for a in assets)
    (botocore,) = [
        a / "python" / "botocore" / "data" for a in assets if (a / "python" / "botocore").is_dir()
    ]
    assert {p.name for p in botocore.iterdir() if p.is_dir()} == AWS_SERVICES
    for layer in assets:  # issue 8's bound, kept from the start
        size = sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())
        assert size < 50 * 2**20, f"{layer.name}: {size / 2**20:.1f} MB unzipped"
    policies = next(a / "policies" for a in assets if (a / "policies").is_dir())
    assert sorted(p.name for p in policies.iterdir()) == [
        "business-hours.yaml",
        "gpu-training.yaml",
        "microservices.yaml",
        "prometheus-queue.yaml",
        "web-predictive.yaml",
        "web-warm.yaml",
        "web.yaml",
    ]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"tickMinutes": 0},
            "cdk.json: context.nodescaler.tickMinutes: Input should be greater than or equal to 1",
        ),
        (
            {"alarms": {"email": "not-an-address"}},
            "cdk.json: context.nodescaler.alarms.email: should be an email address",
        ),
        (
            {"drainGroups": ["web*"]},
            "cdk.json: context.nodescaler.drainGroups[0]: should be an Auto Scaling group's name",
        ),
    ],
)
def test_cdk_synth_refuses_a_bad_cdk_json_value_naming_it(
    tmp_path: Path, context: dict[str, Any], message: str
) -> None:
    result = cdk_synth(project_with(tmp_path, **context), tmp_path / "cdk.out")
    assert result.returncode != 0
    assert "nodescaler: cannot synthesize:" in result.stderr
    assert message in result.stderr


def test_a_c_override_is_laid_over_cdk_json_and_names_the_deployment(tmp_path: Path) -> None:
    # cdk ls runs the app as synth does, without building the layers (into a folder of its
    # own: the CLI locks its output folder, and another test's cdk may be running)
    out = ("--output", str(tmp_path / "cdk.out"))
    listed = cdk(REPO, "ls", *out, "-c", 'nodescaler={"clusterName": "x", "tickMinutes": 5}')
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["nodescaler-x"]
    refused = cdk(REPO, "ls", *out, "-c", "nodescaler=clusterName=x")
    assert refused.returncode != 0
    assert "nodescaler: cannot synthesize:\n-c nodescaler: is not JSON" in refused.stderr


def test_cdk_synth_refuses_a_bad_policy_naming_the_file_and_field(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "bad.yaml").write_text(
        "metadata: {name: bad}\nspec: {minReplicas: 1, maxReplicas: 2, metrics: [{type: Nope}]}\n"
    )
    result = cdk_synth(project_with(tmp_path, policiesFolder=str(policies)), tmp_path / "cdk.out")
    assert result.returncode != 0
    assert f"{policies / 'bad.yaml'}: spec.metrics[0]: unknown metric type 'Nope'" in result.stderr


def test_the_dependencies_layer_keeps_the_model_of_every_aws_service_the_code_calls() -> None:
    import re

    wiring = REPO / "layers" / "core" / "python" / "nodescaler" / "wiring"
    sources = "".join(path.read_text() for path in sorted(wiring.glob("*.py")))
    called = set(re.findall(r'client\("([a-z0-9-]+)"', sources))
    assert called and called <= AWS_SERVICES
