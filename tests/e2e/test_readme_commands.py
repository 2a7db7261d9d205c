"""Every command the README and the pages under docs/ print in a ```sh block, run as
written: the operator CLI against the functions deployed over moto (one tick has decided),
`aws` lines through boto3 on moto, `cdk deploy` as the synth it starts, `kubectl apply` as
the documents it would send. A command a page gains with no runner here fails the test, so
the pages cannot drift from what works. The README's Deploy lists every step, in order."""

from __future__ import annotations

import copy
import json
import re
import shlex
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodescaler_cli.main import main

from tests.aws import CallCounter, client, fill_queue, make_asg
from tests.aws_cli import run_aws, run_aws_input
from tests.builders import VirtualClock
from tests.e2e.conftest import ROOT, TABLE, Deployment
from tests.infra.test_deployments import stacks_in
from tests.infra.test_stack import run_app

# The README first, then every page it leads to.
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
# Lines that cannot run here, and what covers them instead.
NOT_RUN_HERE = {
    "make setup": "make test runs it first; tests/tools/test_makefile.py checks what it does",
    "make demo": "tests/sandbox runs the scenarios; tests/tools/test_makefile.py checks the target",
    "make test": "it is what runs this test",
    "npx cdk bootstrap": "needs an AWS account: it makes the CDK's own bucket and roles there",
    'pip install "./nodescaler[cdk]"': "tests/infra/test_package.py installs the built wheel",
    "TOKEN=$(kubectl -n kube-system get secret nodescaler-token -o jsonpath='{.data.token}' "
    "| base64 -d)": "reads a live cluster's token Secret; kubectl authenticating with such a "
    "token over TLS is tests/tools/test_kubectl.py's",
    "nodescaler simulate week/pods.yaml": "replays the scenario `trace scenario` made of the "
    "user's week; tests/sandbox/test_trace_replay.py replays such a trace",
}
# Subcommands whose lines read what only the user's cluster holds (its Prometheus, its
# snapshots, the trace made from them), with the test that runs their forms here instead.
NOT_RUN_HERE_SUBCOMMANDS = {
    "trace": "reads the user's Prometheus or kubectl snapshots; tests/tools/test_trace_export.py "
    "runs export and scenario against a real Prometheus server and written snapshots",
}
# The README's Deploy, step by step: each line's start, in the order they must run (access
# entries need the cluster's mode first, the cluster's rights need the deployed groups).
DEPLOY_STEPS = (
    "make setup",
    "npx cdk bootstrap",
    "aws eks update-cluster-config",
    "npx cdk deploy",
    "kubectl apply -f infra/kubernetes/",
    "aws autoscaling create-or-update-tags",
    ".venv/bin/nodescaler status",
)
GROUP = "gpu-training-ng"
CLUSTER = "my-cluster"  # the sample cdk.json's cluster
STACK = f"nodescaler-{CLUSTER}"  # and its deployment


@dataclass(frozen=True)
class Command:
    page: str
    section: str
    line: str
    context: str | None  # the JSON block above it under its heading: cdk.json's settings

    def __str__(self) -> str:
        return f"{self.page}, {self.section}: {self.line}"


def page_commands(page: str, section: str | None = None) -> list[Command]:
    """The page's ```sh lines (continuations joined), each with the JSON above it under its
    heading; with `section`, only those under that `## ` heading."""
    found: list[Command] = []
    inside, fence, block, context, heading = section is None, "", [], None, ""
    for line in (ROOT / page).read_text().splitlines():
        if not fence and line.startswith("## ") and section is not None:
            inside = line[3:] == section
        if not inside:
            continue
        if not fence and line.startswith("#"):
            context, heading = None, line.lstrip("#").strip()
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
                        found.append(Command(page, heading, shlex.join(words), context))
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
    """The sample deployment after `cdk deploy` and a tick: its EKS cluster, its stack's
    outputs, one opted-in group with queued work and a decision, an older version of its
    policy applied, an operators' role and an AWS profile named `prod`; the commands run
    from the checkout."""
    monkeypatch.chdir(ROOT)
    client("eks").create_cluster(
        name=CLUSTER,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
    )
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


def run(command: Command, world: dict[str, str], tmp_path: Path, deployed: list[Any]) -> None:
    """Runs one line; `deployed` gathers the templates the page's `cdk deploy` lines made."""
    line = command.line
    for placeholder, value in world.items():
        line = line.replace(placeholder, value)
    words = shlex.split(line)
    if any(words == shlex.split(skipped) for skipped in NOT_RUN_HERE):
        return
    if words[0] in ("nodescaler", ".venv/bin/nodescaler"):
        if words[1] in NOT_RUN_HERE_SUBCOMMANDS:
            return
        allowed = (0, 3) if words[1] == "diff" else (0,)  # diff: 3 when they differ
        for flag in ("--cluster", "--deployment"):  # another deployment's stack, if named
            if flag in words:
                name = words[words.index(flag) + 1]
                _stack(f"nodescaler-{name}", {"StateTableName": TABLE})
        assert _exit_code(words[1:]) in allowed, f"{command}"
    elif words[:3] == ["aws", "eks", "update-cluster-config"]:
        _authentication_mode(command, line)
    elif words[0] == "aws":
        run_aws(line)
    elif words[:3] == ["npx", "cdk", "deploy"]:
        deployed.extend(_synth(command, words[3:], tmp_path).values())
    elif words[:3] == ["kubectl", "apply", "-f"] and SELF_MANAGED in words:
        _service_account_apply(command, [Path(w) for w in words[3::2]])
    elif words[:3] == ["kubectl", "apply", "-f"]:
        _kubectl_apply(command, Path(words[3]), deployed)
    else:
        pytest.fail(f"{command}: no runner for this command (add one, or to NOT_RUN_HERE)")


def _authentication_mode(command: Command, line: str) -> None:
    """The mode set must be one in which EKS takes access entries, as the stack makes them:
    "API_AND_CONFIG_MAP or API" (https://docs.aws.amazon.com/eks/latest/userguide/
    setting-up-access-entries.html); moto takes the call and keeps nothing of the mode."""
    mode = run_aws_input(line)["accessConfig"]["authenticationMode"]
    assert mode in ("API_AND_CONFIG_MAP", "API"), f"{command}: EKS refuses access entries in {mode}"
    run_aws(line)


SELF_MANAGED = "infra/kubernetes/self-managed/"


def _service_account_apply(command: Command, folders: list[Path]) -> None:
    """A cluster outside EKS has no access entries: the service account whose token the
    secret holds must be bound to every role the folders define."""
    documents = [
        d
        for f in folders
        for p in sorted(f.glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d
    ]
    roles = {d["metadata"]["name"] for d in documents if d["kind"] == "ClusterRole"}
    bound = {
        d["roleRef"]["name"]
        for d in documents
        if d["kind"] == "ClusterRoleBinding"
        and any(s["kind"] == "ServiceAccount" for s in d.get("subjects", []))
    }
    assert roles and roles == bound, f"{command}: the service account lacks {roles - bound}"


def _kubectl_apply(command: Command, folder: Path, deployed: list[Any]) -> None:
    """What `kubectl apply -f` sends: every document whole, and rights for each Kubernetes
    group the stack just deployed gives its functions through EKS access entries."""
    assert deployed, f"{command}: comes before any `cdk deploy` that makes the access entries"
    documents = [
        d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d
    ]
    for document in documents:
        assert document.get("apiVersion") and document.get("kind"), f"{command}: {document}"
        assert (document.get("metadata") or {}).get("name"), f"{command}: {document['kind']}"
    bound = {
        subject["name"]
        for d in documents
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for subject in d.get("subjects", [])
        if subject["kind"] == "Group"
    }
    granted = {
        group
        for template in deployed
        for entry in template["Resources"].values()
        if entry["Type"] == "AWS::EKS::AccessEntry"
        for group in entry["Properties"]["KubernetesGroups"]
    }
    assert granted, f"{command}: the deployed stacks give no access entries"
    assert granted <= bound, f"{command}: no rights for {sorted(granted - bound)}"


def _exit_code(argv: list[str]) -> int:
    """The CLI's exit code; --help and --version exit through argparse."""
    try:
        return main(argv)
    except SystemExit as done:
        return int(done.code or 0)


# What app.py synthesized for each settings (as `_synth` passes them), once a session
SYNTHESIZED: dict[tuple[bool, str], dict[str, Any]] = {}


def _synth(command: Command, options: list[str], tmp_path: Path) -> dict[str, Any]:
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
    # a -c string is laid over cdk.json's settings; a page's settings replace them
    asked = (isinstance(settings, str), json.dumps(settings, sort_keys=True))
    if asked not in SYNTHESIZED:  # `--all` and a stack it names: one synth of the same app
        out = Path(tempfile.mkdtemp(dir=tmp_path))
        result = run_app(out, settings)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        SYNTHESIZED[asked] = stacks_in(out)
    stacks = copy.deepcopy(SYNTHESIZED[asked])
    assert set(named) <= set(stacks), f"{command}: synthesized {sorted(stacks)}"
    return stacks


PAGES_WITH_COMMANDS = [page for page in PAGES if page_commands(page)]


def test_given_the_readme_and_docs_then_the_pages_that_print_commands_are_all_found() -> None:
    # Given the pages a user is sent to for commands, Then each has its ```sh lines parsed
    expected = {"README.md", "docs/deploy.md", "docs/cli.md", "docs/operations.md"}
    assert expected <= set(PAGES_WITH_COMMANDS)


def test_given_the_docs_folder_then_each_page_is_linked_from_the_readme() -> None:
    # Given the pages under docs/, When a newcomer starts at the README
    links = set(re.findall(r"\]\((docs/[\w-]+\.md)", (ROOT / "README.md").read_text()))
    # Then each page is one link away
    assert set(PAGES) - {"README.md"} <= links


def test_given_the_readme_deploy_then_it_lists_every_step_in_order() -> None:
    # Given the README's Deploy, When its commands are read in order
    lines = [command.line for command in page_commands("README.md", "Deploy")]
    # Then every step is there, the cluster's side included, in the order they must run
    steps = [next((s for s in DEPLOY_STEPS if line.startswith(s)), line) for line in lines]
    assert [s for s in steps if s in DEPLOY_STEPS] == list(DEPLOY_STEPS), lines


def section(page: str, heading: str) -> str:
    """The text under a `## ` or `### ` heading, to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    text = (ROOT / page).read_text()
    start = text.index(f"\n{heading}\n")
    rest = text[start + len(heading) + 2 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def test_the_readme_says_in_its_first_screen_what_why_what_it_costs_and_its_limits() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    first_screen = "\n".join(readme.splitlines()[:50])
    for said in ("Cluster Autoscaler", "Karpenter", "When not", "a month", "v1alpha1", "moto"):
        assert said in first_screen, said


def test_the_readme_layout_names_every_function_the_stack_deploys() -> None:
    layout = section("README.md", "## Layout")
    for function in sorted(p.name for p in (ROOT / "functions").iterdir() if p.is_dir()):
        assert function in layout, function


def test_the_readme_deploy_says_what_a_self_managed_cluster_does_instead() -> None:
    # Given a cluster that is not EKS (docs/any-kubernetes.md)
    step2 = section("README.md", "### 2. Let the cluster take access entries")
    step4 = section("README.md", "### 4. Give the functions their rights in the cluster")
    # Then step 2 is skipped, and step 4 applies the service account's binding too
    assert "self-managed cluster" in step2 and "skips" in step2
    assert SELF_MANAGED in " ".join(step4.split())
    assert SELF_MANAGED in (ROOT / "docs" / "any-kubernetes.md").read_text()


def test_the_readme_validate_line_says_each_policy_is_valid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the README's offline check, as a user runs it from the checkout
    (line,) = [c.line for c in page_commands("README.md") if " validate " in f"{c.line} "]
    monkeypatch.chdir(ROOT)
    # Then it prints, for each policy file, that its policy is valid, and nothing else
    assert _exit_code(shlex.split(line, comments=True)[1:]) == 0
    printed = capsys.readouterr().out.splitlines()
    files = sorted(p.name for p in (ROOT / "policies").glob("*.yaml"))
    assert [re.sub(r": policy '.*' is valid$", "", out) for out in printed] == [
        f"policies/{name}" for name in files
    ]


@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS)
def test_every_command_of_the_page_runs_as_written(
    page: str, world: dict[str, str], tmp_path: Path
) -> None:
    deployed: list[Any] = []
    for command in page_commands(page):
        run(command, world, tmp_path, deployed)
