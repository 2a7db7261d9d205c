"""Every command the README's "Deploy" and "Ask the autoscaler" sections print, run as
written: the operator CLI against the functions deployed over moto (one tick has decided),
`aws` lines through boto3 on moto, `cdk deploy` as the synth it starts. A command the
README gains with no runner here fails the test, so the sections cannot drift from what
works."""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nodescaler_cli.main import main

from tests.aws import CallCounter, client, fill_queue, make_asg
from tests.aws_cli import run_aws
from tests.builders import VirtualClock
from tests.e2e.conftest import ROOT, TABLE, Deployment
from tests.infra.test_deployments import stacks_in
from tests.infra.test_stack import run_app

SECTIONS = ("Deploy", "Ask the autoscaler")
# Lines that cannot run here, and what covers them instead.
NOT_RUN_HERE = {
    "make setup": "make test runs it first; tests/tools/test_makefile.py checks what it does",
    "npx cdk bootstrap": "needs an AWS account: it makes the CDK's own bucket and roles there",
    'pip install "./nodescaler[cdk]"': "tests/infra/test_package.py installs the built wheel",
}
GROUP = "gpu-training-ng"
CLUSTER = "my-cluster"  # the sample cdk.json's cluster
STACK = f"nodescaler-{CLUSTER}"  # and its deployment


@dataclass(frozen=True)
class Command:
    section: str
    line: str
    context: str | None  # the JSON block above it in its subsection: cdk.json's settings

    def __str__(self) -> str:
        return f"README, {self.section}: {self.line}"


def readme_commands(section: str) -> list[Command]:
    """The section's ```sh lines (continuations joined), each with its subsection's JSON."""
    found: list[Command] = []
    inside, fence, block, context, heading = False, "", [], None, ""
    for line in (ROOT / "README.md").read_text().splitlines():
        if not fence and line.startswith("## "):
            inside, heading = line[3:] == section, line[3:]
        if not inside:
            continue
        if not fence and line.startswith("### "):
            context, heading = None, line[4:]
        elif not fence and line.startswith("```"):
            fence, block = line[3:].strip() or "text", []
        elif fence and line.startswith("```"):
            if fence == "json":
                context = "\n".join(block)
            if fence == "sh":
                joined = "\n".join(block).replace("\\\n", " ")
                for text in joined.splitlines():
                    words = shlex.split(text, comments=True)
                    if words:
                        found.append(Command(heading, shlex.join(words), context))
            fence = ""
        elif fence:
            block.append(line)
    return found


@pytest.fixture
def deployment(policies: Path, calls: CallCounter, clock: VirtualClock) -> Deployment:
    """The functions as the sample cdk.json deploys them: for its cluster, whose groups
    alone they manage."""
    return Deployment(policies, calls, clock, environment={"CLUSTER_NAME": CLUSTER})


@pytest.fixture
def world(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The sample deployment after `cdk deploy` and a tick: its stack's outputs, one opted-in
    group with queued work and a decision, an older version of its policy applied, an
    operators' role and an AWS profile named `prod`; the commands run from the checkout."""
    monkeypatch.chdir(ROOT)
    writer = client("iam").create_policy(
        PolicyName="PolicyWriter", PolicyDocument=json.dumps(_ALLOW_NOTHING)
    )["Policy"]["Arn"]
    client("iam").create_role(
        RoleName="platform-operators", AssumeRolePolicyDocument=json.dumps(_ASSUMED)
    )
    outputs = {
        "StateTableName": TABLE,
        "PolicyWriterPolicyArn": writer,
        "TerminationPolicyArn": f"arn:aws:lambda:eu-west-1:123456789012:function:{STACK}-t",
        "DrainHookName": f"{STACK}-drain",
    }
    _stack(STACK, outputs)
    client("sqs").create_queue(QueueName="ml-training-queue")
    fill_queue("ml-training-queue", 8)
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu-training"}
    make_asg(GROUP, tags=tags | {"nodescaler/cluster": CLUSTER}, max_size=600)
    deployment.tick()
    _apply_earlier(tmp_path, "gpu-training")
    with tempfile.TemporaryDirectory() as folder:
        config, credentials = Path(folder, "config"), Path(folder, "credentials")
        config.write_text("[profile prod]\nregion = eu-west-1\n")
        credentials.write_text("[prod]\naws_access_key_id = a\naws_secret_access_key = b\n")
        monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
        yield {"<group>": GROUP, **{f"<{k}>": v for k, v in outputs.items()}}


_ALLOW_NOTHING = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}],
}
_ASSUMED = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
}


def _stack(name: str, outputs: dict[str, str]) -> None:
    """A stack with the outputs the CLI reads, as moto's CloudFormation keeps them."""
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def _apply_earlier(tmp_path: Path, name: str) -> None:
    """Version 1 of the policy: the shipped document with a lower maximum."""
    shipped = (ROOT / "policies" / f"{name}.yaml").read_text()
    earlier = tmp_path / "earlier" / f"{name}.yaml"
    earlier.parent.mkdir()
    earlier.write_text(shipped.replace("maxReplicas: 600", "maxReplicas: 400"))
    assert main(["apply", "-f", str(earlier), "--stack", STACK]) == 0


def run(command: Command, world: dict[str, str], tmp_path: Path) -> None:
    line = command.line
    for placeholder, value in world.items():
        line = line.replace(placeholder, value)
    words = shlex.split(line)
    if any(words == shlex.split(skipped) for skipped in NOT_RUN_HERE):
        return
    if words[0] in ("nodescaler", ".venv/bin/nodescaler"):
        allowed = (0, 1) if words[1] == "diff" else (0,)  # diff: 1 when they differ
        for flag in ("--cluster", "--deployment"):  # another deployment's stack, if named
            if flag in words:
                name = words[words.index(flag) + 1]
                _stack(f"nodescaler-{name}", {"StateTableName": TABLE})
        assert _exit_code(words[1:]) in allowed, f"{command}"
    elif words[0] == "aws":
        run_aws(line)
    elif words[:3] == ["npx", "cdk", "deploy"]:
        _synth(command, words[3:], tmp_path)
    else:
        pytest.fail(f"{command}: no runner for this command (add one, or to NOT_RUN_HERE)")


def _exit_code(argv: list[str]) -> int:
    """The CLI's exit code; --help and --version exit through argparse."""
    try:
        return main(argv)
    except SystemExit as done:
        return int(done.code or 0)


def _synth(command: Command, options: list[str], tmp_path: Path) -> None:
    """What `cdk deploy` synthesizes first: the stacks it names (or all) must come out."""
    settings: Any = (
        json.loads("{" + command.context + "}")["nodescaler"]
        if command.context
        else (json.loads((ROOT / "cdk.json").read_text())["context"]["nodescaler"])
    )
    named = []
    while options:
        option = options.pop(0)
        if option == "-c":
            key, _, value = options.pop(0).partition("=")
            assert key == "nodescaler", command
            settings = value  # as the CDK CLI passes it: a string, laid over cdk.json's
        elif option != "--all":
            named.append(option)
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    result = run_app(out, settings)
    assert result.returncode == 0, f"{command}\n{result.stderr}"
    stacks = stacks_in(out)
    assert set(named) <= set(stacks), f"{command}: synthesized {sorted(stacks)}"


@pytest.mark.parametrize("section", SECTIONS)
def test_every_command_of_the_section_runs_as_written(
    section: str, world: dict[str, str], tmp_path: Path
) -> None:
    commands = readme_commands(section)
    assert len(commands) >= 3, f"README, {section}: its commands were not found"
    for command in commands:
        run(command, world, tmp_path)
