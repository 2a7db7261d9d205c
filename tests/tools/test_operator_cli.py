"""`nodescaler status` and `explain` against moto: what an operator reads, as an aligned
table or JSON with the keys docs/cli.md lists, and errors in one line that name what is
missing."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tomllib
from datetime import timedelta
from importlib import metadata
from pathlib import Path

import boto3
import pytest
import yaml
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.service.evaluation import Evaluator
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler_cli.main import _target, build_parser, main
from nodescaler_sandbox import provision
from nodescaler_sandbox.provision import create_state_table

from tests.aws import (
    REGION,
    aws,  # noqa: F401  (moto for every test here)
    client,
    fill_queue,
    make_asg,
    make_state_table,
)
from tests.builders import UNLIMITED, VirtualClock, policy, queue_metric

TABLE = "nodescaler-state"
DOCS = Path(__file__).parents[2] / "docs" / "cli.md"
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu"}


@pytest.fixture
def evaluated() -> None:
    """One group evaluated twice (0 → 10, then held), one rejected, one untagged."""
    dynamodb = make_state_table(TABLE)
    client("sqs").create_queue(QueueName="jobs")
    make_asg("gpu-ng", tags=TAGS, max_size=50)
    make_asg("typo-ng", tags=TAGS | {"nodescaler/policy": "gpux"})
    make_asg("untagged")
    clock = VirtualClock()
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=1)),
        policies=PolicyBook(
            {"gpu": policy(queue_metric("jobs", per_node=4), name="gpu", max_replicas=50)}
        ),
        clock=clock,
    )
    fill_queue("jobs", 40)
    evaluator.evaluate("gpu-ng", "tick-1")
    clock.advance(minutes=1)
    evaluator.evaluate("gpu-ng", "tick-2")
    evaluator.evaluate("typo-ng", "tick-2")


def table(out: str) -> list[dict[str, str]]:
    """An aligned table read back by its columns: each header's start is where every row's
    cell starts (a cell that did not line up would read garbled)."""
    header, *lines = out.rstrip("\n").split("\n")
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    starts = [start for start, _ in spans]
    rows = []
    for line in lines:
        for start in starts[1:]:  # each cell starts at its column, after padding
            assert line[start - 1] == " " and line[start] != " ", (line, start)
        ends = [*starts[1:], None]
        rows.append(
            {name: line[start:end].strip() for (start, name), end in zip(spans, ends, strict=True)}
        )
    return rows


def documented_keys(heading: str) -> list[str]:
    """The keys docs/cli.md lists in the table under `heading`, in order."""
    section = DOCS.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)


@pytest.mark.usefixtures("evaluated")
def test_status_shows_each_managed_group_in_an_aligned_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When the operator asks for the status
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    # Then each managed group is a row, its sizes, metrics and decision in aligned columns
    rows = {r["GROUP"]: r for r in table(capsys.readouterr().out)}
    assert set(rows) == {"gpu-ng", "typo-ng"}  # not the untagged group
    assert rows["gpu-ng"] == {
        "GROUP": "gpu-ng",
        "POLICY": "gpu",
        "CURRENT": "10",
        "DESIRED": "10",
        "IN SERVICE": "10",
        "MIN": "0",
        "MAX": "50",
        "METRICS": "jobs 40/4/replica",
        "LAST DECISION": "hold at 10 | jobs: 40 visible + 0 in flight → 10",
        "NOTES": "-",
    }
    typo = rows["typo-ng"]
    assert (typo["POLICY"], typo["DESIRED"], typo["LAST DECISION"]) == (
        "gpux",
        "-",
        "never evaluated",
    )
    assert typo["NOTES"] == "tag nodescaler/policy='gpux' names no deployed policy (deployed: gpu)"


@pytest.mark.usefixtures("evaluated")
def test_status_as_json_has_exactly_the_documented_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--table", TABLE, "-o", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert [g["group"] for g in groups] == ["gpu-ng", "typo-ng"]
    for group in groups:
        assert list(group) == documented_keys("`nodescaler status -o json`")
    gpu, typo = groups
    assert (gpu["current"], gpu["desired"], gpu["in_service"], gpu["min"], gpu["max"]) == (
        10,
        10,
        10,
        0,
        50,
    )
    (jobs,) = gpu["metrics"]
    assert list(jobs) == documented_keys("A metric object")
    assert (jobs["name"], jobs["value"], jobs["target"], jobs["status"]) == (
        "jobs",
        40,
        "4/replica",
        "ok",
    )
    assert gpu["decided_at"] == "2026-03-02T12:01:00Z"
    assert (typo["desired"], typo["metrics"], typo["last_decision"]) == (None, [], None)
    assert typo["notes"] == [
        "tag nodescaler/policy='gpux' names no deployed policy (deployed: gpu)"
    ]
    # And YAML says the same
    assert main(["status", "--table", TABLE, "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"groups": groups}


@pytest.mark.usefixtures("evaluated")
def test_explain_lists_the_latest_decisions_then_every_reading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "gpu-ng", "--table", TABLE]) == 0
    decided, readings = capsys.readouterr().out.split("\n\n")
    newest, oldest = table(decided)
    assert newest["REASON"].startswith("hold at 10")  # newest first
    assert oldest["REASON"].startswith("scale up 0 → 10")
    assert (oldest["CHANGE"], oldest["BOUNDS"], oldest["LIMITED BY"]) == (
        "0 → 10",
        "[0, 50]",
        "nothing",
    )
    assert table(readings)[1] == {
        "AT": oldest["AT"],
        "METRIC": "jobs",
        "TYPE": "SQSQueue",
        "VALUE": "40",
        "TARGET": "4/replica",
        "WANTS": "10",
        "STATUS": "ok",
        "DETAIL": "40 visible + 0 in flight",
    }


@pytest.mark.usefixtures("evaluated")
def test_explain_as_json_has_exactly_the_documented_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "gpu-ng", "--table", TABLE, "-o", "json", "--last", "1"]) == 0
    (decision,) = json.loads(capsys.readouterr().out)["decisions"]
    assert list(decision) == documented_keys("`nodescaler explain GROUP -o json`")
    assert list(decision["metrics"][0]) == documented_keys("A metric object")
    assert (decision["at"], decision["current"], decision["desired"]) == (
        "2026-03-02T12:01:00Z",
        10,
        10,
    )


def test_status_and_explain_name_a_fallback_and_since_when(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dynamodb = make_state_table(TABLE)
    make_asg("api-ng", tags=TAGS | {"nodescaler/policy": "api"}, desired=6, max_size=50)
    gone = queue_metric("gone", per_node=4) | {"fallback": {"failureThreshold": 1, "replicas": 2}}
    clock = VirtualClock()
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=1)),
        policies=PolicyBook({"api": policy(gone, name="api", behavior=UNLIMITED)}),
        clock=clock,
    )
    first = clock.now()
    for tick in ("tick-1", "tick-2"):  # no such queue: missing, then its fallback
        evaluator.evaluate("api-ng", tick)
        clock.advance(minutes=1)

    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    (row,) = table(capsys.readouterr().out)
    since = f"since {first:%Y-%m-%d %H:%M:%S}Z"
    assert (row["CURRENT"], row["DESIRED"]) == ("2", "2")
    assert row["METRICS"] == f"gone ?/4/replica (fallback replicas 2 {since})"
    assert main(["explain", "api-ng", "--table", TABLE]) == 0
    newest = table(capsys.readouterr().out.split("\n\n")[1])[0]
    assert (newest["VALUE"], newest["WANTS"], newest["STATUS"]) == (
        "-",
        "2",
        f"fallback replicas 2 {since}",
    )
    assert main(["status", "--table", TABLE, "-o", "json"]) == 0
    (metric,) = json.loads(capsys.readouterr().out)["groups"][0]["metrics"]
    assert (metric["status"], metric["fallback"], metric["failing_since"]) == (
        "fallback",
        "replicas 2",
        first.isoformat().replace("+00:00", "Z"),
    )


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command wrote to stderr, checked to be one line and no traceback."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


def test_a_missing_state_table_is_named_with_its_region(
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_asg("gpu-ng", tags=TAGS)
    for argv in (["status"], ["explain", "gpu-ng"]):
        assert main([*argv, "--table", "missing-table"]) == 1
        assert one_line(capsys) == (
            f"nodescaler {argv[0]}: state table missing-table does not exist in region "
            f"{REGION} (deployed? --table?)"
        )


def test_a_missing_stack_is_named_with_its_region(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status"]) == 1  # no --table, and no stack (cdk.json's deployment) to find it in
    assert one_line(capsys) == (
        f"nodescaler status: stack nodescaler-my-cluster not found in region {REGION}; "
        "pass --stack or --table"
    )
    assert main(["explain", "gpu-ng", "--stack", "Other", "--region", "us-west-2"]) == 1
    assert one_line(capsys) == (
        "nodescaler explain: stack Other not found in region us-west-2; pass --stack or --table"
    )


def test_a_table_that_is_not_the_state_table_is_one_line_from_aws(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given --table names some other table, keyed otherwise
    client("dynamodb").create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    make_asg("gpu-ng", tags=TAGS)
    # Then AWS's refusal is one line naming the call, the region and AWS's reason
    assert main(["status", "--table", "orders"]) == 1
    assert one_line(capsys) == (
        f"nodescaler status: AWS refused GetItem in region {REGION}: ValidationException: "
        "The provided key element does not match the schema"
    )


def test_the_deployment_cdk_json_describes_names_the_stack_table_and_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_state_table("from-the-stack")
    cloudformation = client("cloudformation")
    output = {"StateTableName": {"Value": "from-the-stack"}}
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": output}
    cloudformation.create_stack(
        StackName="nodescaler-my-cluster", TemplateBody=json.dumps(template)
    )
    make_asg("gpu-ng", tags=TAGS | {"nodescaler/cluster": "my-cluster"})
    make_asg("other-ng", tags=TAGS | {"nodescaler/cluster": "other"})  # another deployment's
    assert main(["status"]) == 0
    assert [r["GROUP"] for r in table(capsys.readouterr().out)] == ["gpu-ng"]
    assert main(["pause", "other-ng"]) == 1  # not this deployment's to pause
    assert "not opted in (no tag nodescaler/enabled=true and nodescaler/cluster=my-cluster)" in (
        capsys.readouterr().err
    )


@pytest.mark.usefixtures("evaluated")
@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("nope", f"node group nope not found in region {REGION}"),
        (
            "untagged",
            "node group untagged is not managed: it is not tagged nodescaler/enabled=true",
        ),
        (
            "typo-ng",
            "node group typo-ng: tag nodescaler/policy='gpux' names no deployed policy "
            "(deployed: gpu) (no decisions recorded)",
        ),
    ],
)
def test_explain_says_why_a_group_has_no_decisions(
    group: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", group, "--table", TABLE]) == 1
    assert one_line(capsys) == f"nodescaler explain: {message}"


def test_explain_names_a_managed_group_not_yet_evaluated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_state_table(TABLE)
    make_asg("new-ng", tags=TAGS)
    assert main(["explain", "new-ng", "--table", TABLE]) == 1
    assert one_line(capsys) == (
        "nodescaler explain: node group new-ng: no decisions recorded yet "
        "(it is evaluated at the next tick)"
    )


@pytest.mark.parametrize(
    ("tags", "note"),
    [
        (
            {"nodescaler/policy": "GPU!"},
            "tag nodescaler/policy='GPU!' is not a policy name (lowercase letters, digits and '-')",
        ),
        ({"nodescaler/policy": " "}, "tag nodescaler/policy is missing or empty"),
        (
            {"nodescaler/dry-run": "maybe"},
            "tag nodescaler/dry-run='maybe' must be true or false; treating the group as "
            "dry-run; dry-run",
        ),
    ],
)
def test_status_says_why_a_group_is_rejected_before_any_evaluation(
    tags: dict[str, str], note: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a group opted in with a bad tag value, never evaluated (nothing in its state)
    make_state_table(TABLE)
    make_asg("bad-ng", tags=TAGS | tags)
    # When the operator asks for the status, then its row says what is wrong, and where
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    (row,) = table(capsys.readouterr().out)
    assert row["NOTES"] == note
    assert main(["status", "--table", TABLE, "-o", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert "; ".join(group["notes"]) == note


@pytest.mark.usefixtures("evaluated")
def test_one_group_s_unreadable_state_is_its_note_and_the_others_are_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given gpu-ng's state item corrupted by hand
    client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": "GROUP#gpu-ng"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET history = :v",
        ExpressionAttributeValues={":v": {"S": "not json"}},
    )
    # When the operator asks for the status, then every group is listed, and gpu-ng's row
    # says what to do about its state
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    rows = {r["GROUP"]: r for r in table(capsys.readouterr().out)}
    assert set(rows) == {"gpu-ng", "typo-ng"}
    assert rows["gpu-ng"]["NOTES"].startswith(
        f"state item (GROUP#gpu-ng, STATE) in {TABLE} is unreadable"
    )
    assert rows["gpu-ng"]["LAST DECISION"] == "never evaluated"


def test_status_with_no_managed_group_says_which_tag_opts_one_in(
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_state_table(TABLE)
    make_asg("untagged")
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    assert capsys.readouterr().out == (
        "(no managed node groups: none carries nodescaler/enabled=true)\n"
    )
    assert main(["status", "--table", TABLE, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"groups": []}


def test_status_reads_the_tag_names_from_cdk_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deployment whose cdk.json renames the opt-in and policy tags
    make_state_table(TABLE)
    custom = {"enabled": "acme.io/autoscale", "policy": "acme.io/policy"}
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"nodescaler": {"tags": custom}}}))
    make_asg("acme-ng", tags={"acme.io/autoscale": "true", "acme.io/policy": "web"})
    make_asg("default-ng", tags=TAGS)  # the default names: not what this deployment reads
    # When status runs with --config, or from the folder of that cdk.json
    assert main(["status", "--table", TABLE, "--config", str(cdk_json)]) == 0
    from_config = table(capsys.readouterr().out)
    monkeypatch.chdir(tmp_path)
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    # Then it lists the groups those tags opt in, with the policy they name
    for rows in (from_config, table(capsys.readouterr().out)):
        assert [(r["GROUP"], r["POLICY"]) for r in rows] == [("acme-ng", "web")]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not JSON: Expecting property name enclosed in double quotes"),
        (
            '{"context": {"nodescaler": {"tags": {"optIn": "x"}}}}',
            "context.nodescaler.tags.optIn: not a tag setting (known: enabled, policy, "
            "cluster, dryRun, paused)",
        ),
        (
            '{"context": {"nodescaler": {"tags": {"policy": ""}}}}',
            "context.nodescaler.tags.policy: should be a tag name, got ''",
        ),
        (
            '{"context": {"nodescaler": {"tags": ["x"]}}}',
            "context.nodescaler.tags: should be an object of tag names",
        ),
    ],
)
def test_a_bad_cdk_json_is_one_line_naming_the_file(
    content: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_state_table(TABLE)
    (tmp_path / "cdk.json").write_text(content)
    monkeypatch.chdir(tmp_path)
    assert main(["status", "-o", "wide", "--table", TABLE]) == 2
    assert one_line(capsys).startswith(f"nodescaler status: cdk.json: {problem}")


def test_a_missing_config_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_state_table(TABLE)
    absent = tmp_path / "cdk.json"
    assert main(["status", "--table", TABLE, "--config", str(absent)]) == 2
    assert one_line(capsys) == (
        f"nodescaler status: {absent}: cannot read it (No such file or directory)"
    )


@pytest.fixture
def aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AWS config with one profile, `ops`, in us-east-2; no region or keys elsewhere."""
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    config.write_text("[profile ops]\nregion = us-east-2\n")
    credentials.write_text("[ops]\naws_access_key_id = ops\naws_secret_access_key = ops\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # nothing beyond loopback
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("aws_config")
def test_profile_chooses_the_credentials_and_region(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the state table and a group in the profile's region only
    session = boto3.Session(profile_name="ops")
    create_state_table(session.client("dynamodb"), TABLE)
    autoscaling = session.client("autoscaling")
    provision.launch_configuration(autoscaling, "nodes", "m5.large")
    provision.create_group(
        autoscaling, "ops-ng", region="us-east-2", tags=TAGS, min_size=0, max_size=5, desired=1
    )
    # When status runs with the profile, then it reads that region with those credentials
    assert main(["status", "--table", TABLE, "--profile", "ops", "-o", "json"]) == 0
    assert [g["group"] for g in json.loads(capsys.readouterr().out)["groups"]] == ["ops-ng"]
    # And without it, nothing says which region: one line says so
    assert main(["status", "-o", "wide", "--table", TABLE]) == 1
    assert one_line(capsys) == (
        "nodescaler status: no AWS region: pass --region, set AWS_REGION, or set one in "
        "your AWS config"
    )


@pytest.mark.usefixtures("aws_config")
def test_aws_region_is_honoured_as_the_aws_cli_honours_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the state table and a group in us-east-2, and AWS_REGION (not boto3's own
    # AWS_DEFAULT_REGION) naming it, with the profile's credentials
    session = boto3.Session(profile_name="ops")
    create_state_table(session.client("dynamodb"), TABLE)
    autoscaling = session.client("autoscaling")
    provision.launch_configuration(autoscaling, "nodes", "m5.large")
    provision.create_group(
        autoscaling, "ops-ng", region="us-east-2", tags=TAGS, min_size=0, max_size=5, desired=1
    )
    monkeypatch.setenv("AWS_PROFILE", "ops")
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # AWS_REGION wins, as in the AWS CLI
    # When status runs with no --region, then it reads AWS_REGION's region
    assert main(["status", "--table", TABLE, "-o", "json"]) == 0
    assert [g["group"] for g in json.loads(capsys.readouterr().out)["groups"]] == ["ops-ng"]


@pytest.mark.usefixtures("aws_config")
def test_diff_without_a_region_is_one_line_and_exit_1_as_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "gpu.yaml"
    policy.write_text((DOCS.parents[1] / "policies" / "gpu-training.yaml").read_text())
    assert main(["diff", "-f", str(policy), "--table", TABLE]) == 1
    assert one_line(capsys) == (
        "nodescaler diff: no AWS region: pass --region, set AWS_REGION, or set one in your "
        "AWS config"
    )


@pytest.mark.usefixtures("aws_config")
def test_an_unknown_profile_and_no_credentials_are_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--table", TABLE, "--profile", "nope"]) == 1
    assert one_line(capsys) == (
        "nodescaler status: AWS profile nope not found in your AWS config or credentials file"
    )
    assert main(["explain", "gpu-ng", "--table", TABLE, "--region", REGION]) == 1
    assert one_line(capsys) == (
        "nodescaler explain: no AWS credentials found: run `aws configure`, set AWS_PROFILE "
        "or pass --profile"
    )


def test_an_unreachable_aws_names_the_region_not_an_endpoint_url_never_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import EndpointConnectionError
    from nodescaler_cli.observe import Target, aws_problem

    error = EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com/")
    problem = aws_problem(error, Target(region="eu-west-1"))
    assert problem == (
        "cannot reach https://dynamodb.eu-west-1.amazonaws.com/ (is the network up, and "
        "region eu-west-1 right?)"
    )
    assert "--endpoint-url" not in problem


def test_an_unreachable_endpoint_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    assert main(["status", "--table", TABLE, "--endpoint-url", endpoint]) == 1
    assert one_line(capsys) == (
        f"nodescaler status: cannot reach {endpoint}/ (is --endpoint-url right, and the "
        "network up?)"
    )


def test_version_is_the_package_s(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = tomllib.loads((DOCS.parents[1] / "pyproject.toml").read_text())
    expected = f"nodescaler {pyproject['project']['version']}\n"
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert (done.value.code, capsys.readouterr().out) == (0, expected)

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    # Run from a checkout, not installed: pyproject.toml's version
    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == expected


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    # `nodescaler validate | head -1`: the pipe closed before the command writes
    command = [sys.executable, "-m", "nodescaler_cli.main", "validate", "policies"]
    running = subprocess.Popen(
        command, cwd=DOCS.parents[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert running.stdout is not None and running.stderr is not None
    running.stdout.close()
    error = running.stderr.read().decode()
    assert (running.wait(), error) == (0, "")


def test_help_documents_the_exit_codes_and_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes:\n  0  done\n  1  an AWS or operator problem" in out
    with pytest.raises(SystemExit) as done:
        main(["status", "-o", "xml"])
    assert done.value.code == 2  # argparse's usage error, as the epilog says
    assert "invalid choice: 'xml'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["explain", "gpu-ng", "--last", "0"])
    assert done.value.code == 2
    assert "'0' is not a whole number of one or more" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "absent.yaml"], "nodescaler simulate: absent.yaml: cannot read it"),
        (["invoke", "drain", "absent.json"], "nodescaler invoke: absent.json: cannot read it"),
    ],
)
def test_a_missing_scenario_or_event_is_one_line_not_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(message)


def test_an_event_that_is_not_json_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text("{not json")
    assert main(["invoke", "dispatch", str(event)]) == 2
    assert capsys.readouterr().err.startswith(f"nodescaler invoke: {event}: not JSON:")


@pytest.mark.parametrize(
    ("argv", "stack", "cluster"),
    [
        (["--cluster", "prod-eu"], "nodescaler-europe", "prod-eu"),  # renamed: by its entry
        (["--deployment", "europe"], "nodescaler-europe", "prod-eu"),
        (["--deployment", "staging"], "nodescaler-staging", "staging"),
        (["--cluster", "elsewhere"], "nodescaler-elsewhere", "elsewhere"),
        # named outright: --cluster narrows, or the stack's ClusterName output (None here)
        (["--stack", "mine"], "mine", None),
        (["--stack", "mine", "--cluster", "staging"], "mine", "staging"),
    ],
)
def test_a_deployment_is_found_by_its_cdk_json_entry(
    tmp_path: Path, argv: list[str], stack: str, cluster: str | None
) -> None:
    config = tmp_path / "cdk.json"
    deployments = [{"clusterName": "prod-eu", "name": "europe"}, {"clusterName": "staging"}]
    config.write_text(json.dumps({"context": {"nodescaler": {"deployments": deployments}}}))
    args = build_parser().parse_args(["status", "--config", str(config), *argv])
    target = _target(args)
    assert (target.stack, target.cluster) == (stack, cluster)
