"""Policies as data against moto: `apply`, `get policies`, `diff`, `history`, `rollback`,
every bad input (one line, a non-zero exit, nothing written), racing applies, and the
evaluator picking a stored policy up once its cache has expired."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.policy_store import DynamoPolicyStore, PolicyChange
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.adapters.policy_keys import HEADS_PK, versions_pk
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.errors import PolicyConflictError
from nodescaler.service.evaluation import Evaluator, Outcome
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler.service.stored_policies import StoredPolicies
from nodescaler_cli.main import main

from tests.aws import (
    DYNAMODB_ITEM_LIMIT,
    aws,  # noqa: F401  (moto for every test here)
    client,
    fill_queue,
    make_asg,
    make_state_table,
    state_item_bytes,
)
from tests.builders import EXACT, VirtualClock, policy, policy_document, queue_metric
from tests.tools.test_operator_cli import documented_keys

TABLE = "nodescaler-state"
AT = ["--table", TABLE]
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu"}


def gpu(per_node: float = 4, max_replicas: int = 50) -> str:
    return policy_document(
        "gpu", queue_metric("jobs", per_node), max_replicas=max_replicas, behavior=EXACT
    )


def web() -> str:
    return policy_document("web", queue_metric("requests", 10), max_replicas=20)


@pytest.fixture
def table() -> Any:
    return make_state_table(TABLE)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "gpu.yaml").write_text(gpu())
    (tmp_path / "web.yaml").write_text(web())
    return tmp_path


def policy_items(dynamodb: Any) -> list[dict[str, Any]]:
    items = dynamodb.scan(TableName=TABLE)["Items"]
    return [i for i in items if i["pk"]["S"] == HEADS_PK or i["pk"]["S"].startswith("POLICY#")]


def listed(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    assert main(["get", "policies", *AT, "-o", "json"]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)["policies"]}


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


@pytest.mark.usefixtures("table")
def test_given_a_folder_when_applied_twice_then_each_policy_is_stored_once_with_who_and_whence(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["apply", "-f", str(folder), *AT]) == 0
    out = capsys.readouterr().out
    assert f"policy gpu: v1 applied from {folder / 'gpu.yaml'}" in out
    assert f"policy web: v1 applied from {folder / 'web.yaml'}" in out

    assert main(["apply", "-f", str(folder), *AT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "policy gpu: unchanged (v1)",
        "policy web: unchanged (v1)",
    ]
    rows = listed(capsys)
    caller = client("sts").get_caller_identity()["Arn"]
    assert rows["gpu"] | {"applied_at": None} == {
        "name": "gpu",
        "version": 1,
        "applied_by": caller,
        "applied_at": None,
        "source": "stored",
        "problem": None,
    }
    assert rows["web"]["version"] == 1
    assert main(["get", "policies", *AT]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "NAME",
        "VERSION",
        "APPLIED",
        "BY",
        "APPLIED",
        "AT",
        "SOURCE",
        "PROBLEM",
    ]
    assert [line.split()[:2] for line in lines] == [["gpu", "1"], ["web", "1"]]


@pytest.mark.usefixtures("table")
def test_given_a_changed_file_then_diff_shows_it_apply_versions_it_and_rollback_restores(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["apply", "-f", str(folder), *AT])
    capsys.readouterr()
    assert main(["diff", "-f", str(folder), *AT]) == 0
    assert capsys.readouterr().out == ""

    (folder / "gpu.yaml").write_text(gpu(per_node=8))
    assert main(["diff", "-f", str(folder), *AT]) == 3  # not 1: an AWS problem
    out = capsys.readouterr().out
    assert "--- stored/gpu (v1)" in out
    assert "\n-      averageValue: 4\n+      averageValue: 8\n" in out

    assert main(["apply", "-f", str(folder / "gpu.yaml"), *AT]) == 0
    assert "policy gpu: v2 applied" in capsys.readouterr().out
    assert main(["diff", "-f", str(folder), *AT]) == 0

    assert main(["rollback", "gpu", "--to", "1", *AT]) == 0
    assert "policy gpu: v3 applied from rollback to v1" in capsys.readouterr().out
    store = DynamoPolicyStore(client("dynamodb"), TABLE)
    head = store.head("gpu")
    assert head is not None and head.version == 3
    assert head.document == gpu()

    assert main(["history", "gpu", *AT, "-o", "json"]) == 0
    versions = json.loads(capsys.readouterr().out)["versions"]
    assert [(v["version"], v["source"], v["current"]) for v in versions] == [
        (1, str(folder / "gpu.yaml"), False),
        (2, str(folder / "gpu.yaml"), False),
        (3, "rollback to v1", True),
    ]
    assert all(list(v) == documented_keys("`nodescaler history NAME -o json`") for v in versions)
    assert main(["get", "policies", *AT, "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["policies"]
    assert [row["name"] for row in listed][:1] == ["gpu"]
    assert all(list(row) == documented_keys("`nodescaler get policies -o json`") for row in listed)


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        (
            {"gpu.yaml": gpu(), "bad.yaml": gpu().replace("maxReplicas: 50", "maxReplicas: many")},
            "bad.yaml: spec.maxReplicas: ",
        ),
        (
            {"gpu.yaml": gpu(), "also-gpu.yaml": gpu(per_node=8)},
            "metadata.name: policy 'gpu' is already defined in",
        ),
    ],
    ids=["invalid-file", "name-clash"],
)
def test_given_a_bad_folder_when_applied_then_validate_s_errors_and_nothing_is_written(
    table: Any,
    tmp_path: Path,
    files: dict[str, str],
    problem: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert main(["validate", str(tmp_path)]) == 2
    validate_says = capsys.readouterr().err

    assert main(["apply", "-f", str(tmp_path), *AT]) == 2
    assert capsys.readouterr().err == validate_says
    assert problem in validate_says
    assert policy_items(table) == []


@pytest.mark.usefixtures("table")
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["rollback", "gpu", "--to", "7"],
            "nodescaler rollback: policy gpu has no version 7 (versions 1 to 1)",
        ),
        (
            ["rollback", "gpux", "--to", "1"],
            "nodescaler rollback: no stored policy 'gpux' (stored: gpu, web)",
        ),
        (["history", "gpux"], "nodescaler history: no stored policy 'gpux' (stored: gpu, web)"),
    ],
)
def test_given_a_version_or_name_that_is_not_stored_then_one_line_and_nothing_written(
    folder: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["apply", "-f", str(folder), *AT])
    capsys.readouterr()
    before = policy_items(client("dynamodb"))

    assert main([*argv, *AT]) == 1
    assert error_line(capsys) == message
    assert policy_items(client("dynamodb")) == before


def test_given_a_corrupt_stored_policy_then_commands_name_the_item_and_write_nothing(
    table: Any, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["apply", "-f", str(folder), *AT])
    table.update_item(
        TableName=TABLE,
        Key={"pk": {"S": HEADS_PK}, "sk": {"S": "gpu"}},
        UpdateExpression="REMOVE document",
    )
    capsys.readouterr()
    before = policy_items(table)

    for argv, code in (
        (["apply", "-f", str(folder)], 1),
        (["rollback", "gpu", "--to", "1"], 1),
        (["diff", "-f", str(folder)], 1),  # an AWS problem, as every command's
    ):
        assert main([*argv, *AT]) == code
        assert error_line(capsys).endswith(
            f"stored policy gpu: item (POLICIES, gpu) in {TABLE} is unreadable "
            "(KeyError: 'document'): delete that item and apply the policy again "
            "(its versions stay)"
        )
    assert policy_items(table) == before
    assert "unreadable" in listed(capsys)["gpu"]["problem"]

    # Deleted as the error says, the policy is applied afresh after its last version.
    table.delete_item(TableName=TABLE, Key={"pk": {"S": HEADS_PK}, "sk": {"S": "gpu"}})
    assert main(["apply", "-f", str(folder), *AT]) == 0
    assert "policy gpu: v2 applied" in capsys.readouterr().out


def test_given_a_stored_version_that_no_longer_validates_then_rollback_to_it_is_refused(
    table: Any, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["apply", "-f", str(folder), *AT])
    (folder / "gpu.yaml").write_text(gpu(per_node=8))
    main(["apply", "-f", str(folder), *AT])
    table.update_item(
        TableName=TABLE,
        Key={"pk": {"S": versions_pk("gpu")}, "sk": {"S": "VERSION#000001"}},
        UpdateExpression="SET document = :d",
        ExpressionAttributeValues={
            ":d": {"S": gpu().replace("maxReplicas: 50", "maxReplicas: -1")}
        },
    )
    capsys.readouterr()
    before = policy_items(table)
    assert main(["rollback", "gpu", "--to", "1", *AT]) == 1
    assert error_line(capsys).startswith(
        "nodescaler rollback: stored policy gpu v1 is invalid: spec.maxReplicas: "
    )
    assert policy_items(table) == before


def test_given_two_applies_racing_then_the_second_writes_nothing_at_all(table: Any) -> None:
    store = DynamoPolicyStore(table, TABLE)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    store.apply([PolicyChange("gpu", 1, gpu(), "gpu.yaml", 0)], "arn:me", at)
    first = PolicyChange("gpu", 2, gpu(per_node=8), "gpu.yaml", 1)
    store.apply([first], "arn:me", at)
    before = policy_items(table)

    # Both read v1; the second also brings a new policy: neither of its writes lands.
    late = [
        PolicyChange("web", 1, web(), "web.yaml", 0),
        PolicyChange("gpu", 2, gpu(per_node=2), "gpu.yaml", 1),
    ]
    with pytest.raises(PolicyConflictError, match="another apply wrote first; nothing was written"):
        store.apply(late, "arn:other", at)
    assert policy_items(table) == before
    assert store.head("web") is None
    # A new version number does not help: the head is no longer at the version read.
    with pytest.raises(PolicyConflictError):
        store.apply([PolicyChange("gpu", 3, gpu(per_node=2), "gpu.yaml", 1)], "arn:other", at)
    assert policy_items(table) == before


def deployed_stack(reads: dict[str, Any]) -> None:
    """The sample cdk.json's deployment, its `DeployedPolicies` output saying `reads`."""
    deployed = {"names": ["gpu"], "reads": reads}
    client("cloudformation").create_stack(
        StackName="nodescaler-my-cluster",
        TemplateBody=json.dumps(
            {
                "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
                "Outputs": {
                    "StateTableName": {"Value": TABLE},
                    "DeployedPolicies": {"Value": json.dumps(deployed)},
                },
            }
        ),
    )


def test_given_a_stack_when_a_stored_policy_reads_a_new_queue_then_apply_warns_and_stores_it(
    table: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed_stack({"sqsQueues": ["jobs"], "kubernetes": False})
    (tmp_path / "web.yaml").write_text(web())
    assert main(["apply", "-f", str(tmp_path / "web.yaml")]) == 0  # the table from the stack
    out, err = capsys.readouterr()
    assert "policy web: v1 applied" in out
    assert err.startswith("warning: policy web reads SQS queue requests, which the deployed stack")
    rows = listed(capsys)
    assert (rows["gpu"]["source"], rows["gpu"]["version"]) == ("deployed", "deployed")
    assert (rows["web"]["source"], rows["web"]["version"]) == ("stored", 1)


def token_policy(server_address: str) -> str:
    prometheus = {
        "type": "Prometheus",
        "name": "backlog",
        "prometheus": {
            "query": "sum(jobs)",
            "serverAddress": server_address,
            "bearerTokenSecret": "prom/token",
        },
        "target": {"type": "AverageValue", "averageValue": 4},
    }
    return policy_document("gpu", queue_metric("jobs"), prometheus, max_replicas=50)


def test_given_a_deployed_secret_sent_to_another_server_then_apply_refuses_it_naming_the_pair(
    table: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed_stack(
        {"secrets": ["prom/token"], "tokenOrigins": [["prom/token", "https://prom:443"]]}
    )
    file = tmp_path / "gpu.yaml"
    file.write_text(token_policy("https://prom.evil.example"))

    assert main(["apply", "-f", str(file)]) == 2
    assert error_line(capsys) == (
        f"{file}: spec.metrics[1].prometheus.serverAddress: bearer token secret prom/token is "
        "deployed for https://prom:443, not for https://prom.evil.example:443: refused, the "
        "token is neither read nor sent; deploy the policy with the stack to send the token "
        "there; nothing applied"
    )
    assert policy_items(table) == []
    # the deployed server, however it is written, is the token's own
    file.write_text(token_policy("https://PROM:443/prometheus"))
    assert main(["apply", "-f", str(file)]) == 0
    assert "policy gpu: v1 applied" in capsys.readouterr().out


def test_given_a_stored_version_sending_the_token_elsewhere_then_rollback_to_it_is_refused(
    table: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed_stack(
        {"secrets": ["prom/token"], "tokenOrigins": [["prom/token", "https://prom:443"]]}
    )
    store = DynamoPolicyStore(client("dynamodb"), TABLE)
    at = datetime(2026, 3, 2, tzinfo=UTC)
    store.apply([PolicyChange("gpu", 1, token_policy("https://evil"), "gpu.yaml", 0)], "w", at)
    store.apply([PolicyChange("gpu", 2, token_policy("https://prom"), "gpu.yaml", 1)], "w", at)
    before = policy_items(table)

    assert main(["rollback", "gpu", "--to", "1"]) == 2
    assert error_line(capsys).startswith(
        "stored policy gpu v1: spec.metrics[1].prometheus.serverAddress: bearer token secret "
        "prom/token is deployed for https://prom:443, not for https://evil:443: refused"
    )
    assert policy_items(table) == before


def test_given_a_stack_that_does_not_pair_its_secrets_then_apply_warns_that_evaluate_decides(
    table: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed_stack({"sqsQueues": ["jobs"], "secrets": ["prom/token"]})  # before the pairs
    (tmp_path / "gpu.yaml").write_text(token_policy("https://prom"))
    assert main(["apply", "-f", str(tmp_path / "gpu.yaml")]) == 0
    assert error_line(capsys).startswith(
        "warning: stack nodescaler-my-cluster does not say which servers its bearer token "
        "secrets are deployed for"
    )


# --- the functions read what was applied ------------------------------------------------


def evaluator(
    dynamodb: Any, clock: VirtualClock, *, deployed: dict[str, Any], read: list[Exception]
) -> Evaluator:
    stored = StoredPolicies(DynamoPolicyStore(dynamodb, TABLE), clock, on_failure=read.append)
    return Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=1)),
        policies=PolicyBook(deployed, stored=stored),
        clock=clock,
    )


@pytest.fixture
def gpu_group(table: Any) -> Any:
    client("sqs").create_queue(QueueName="jobs")
    make_asg("gpu-ng", tags=TAGS, max_size=50)
    fill_queue("jobs", 40)
    return table


DEPLOYED_GPU = {
    "gpu": policy(queue_metric("jobs", per_node=8), name="gpu", max_replicas=50, behavior=EXACT)
}


def test_given_an_applied_policy_then_evaluate_uses_it_once_its_cache_expires_and_says_which(
    gpu_group: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock, failures = VirtualClock(), []
    scaler = evaluator(gpu_group, clock, deployed=DEPLOYED_GPU, read=failures)
    first = scaler.evaluate("gpu-ng", "tick-1").decision
    assert first is not None and (first.desired, first.policy_version) == (5, "deployed")

    (tmp_path / "gpu.yaml").write_text(gpu(per_node=4))
    assert main(["apply", "-f", str(tmp_path), *AT]) == 0
    clock.advance(seconds=59)
    cached = scaler.evaluate("gpu-ng", "tick-2").decision
    assert cached is not None and (cached.desired, cached.policy_version) == (5, "deployed")
    clock.advance(seconds=1)
    fresh = scaler.evaluate("gpu-ng", "tick-3").decision
    assert fresh is not None and (fresh.desired, fresh.policy_version) == (10, 1)
    assert failures == []

    capsys.readouterr()
    assert main(["explain", "gpu-ng", *AT, "-o", "json"]) == 0
    newest, older, *_ = json.loads(capsys.readouterr().out)["decisions"]
    assert (newest["policy_version"], older["policy_version"]) == (1, "deployed")
    assert main(["explain", "gpu-ng", *AT]) == 0
    assert "gpu v1  " in capsys.readouterr().out


@pytest.mark.parametrize("deployed", [DEPLOYED_GPU, {}], ids=["deployed-fallback", "none"])
def test_given_a_stored_policy_that_no_longer_validates_then_it_is_never_used_and_status_says_why(
    gpu_group: Any, tmp_path: Path, deployed: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gpu.yaml").write_text(gpu(per_node=4))
    main(["apply", "-f", str(tmp_path), *AT])
    gpu_group.update_item(
        TableName=TABLE,
        Key={"pk": {"S": HEADS_PK}, "sk": {"S": "gpu"}},
        UpdateExpression="SET document = :d",
        ExpressionAttributeValues={
            ":d": {"S": gpu().replace("averageValue: 4", "averageValue: -4")}
        },
    )
    result = evaluator(gpu_group, VirtualClock(), deployed=deployed, read=[]).evaluate(
        "gpu-ng", "tick-1"
    )

    invalid = "node group gpu-ng: stored policy gpu v1 is invalid: spec.metrics[0].target"
    assert any(p.startswith(invalid) for p in result.problems), result.problems
    if deployed:
        assert result.decision is not None
        assert (result.decision.desired, result.decision.policy_version) == (5, "deployed")
        assert any(p.endswith("; the deployed policy gpu is used") for p in result.problems)
    else:
        assert result.outcome is Outcome.REJECTED
        assert any(p.endswith("; not evaluated") for p in result.problems)
    capsys.readouterr()
    assert main(["status", *AT]) == 0
    assert "stored policy gpu v1 is invalid" in capsys.readouterr().out


# A 1 KB document whose problem quotes the value it was given: 10**4 lists, 750 KB as text
ALIASED_WINDOW = """  scaleInWindows:
  - schedule: '0 1 * * *'
    durationMinutes: 60
    maxNodesPerHour: [&d [&c [&b [&a ["xxxxxxxxxxxxxxxxxxxxxxxx",x,x,x,x,x,x,x,x,x],
      *a,*a,*a,*a,*a,*a,*a,*a,*a], *b,*b,*b,*b,*b,*b,*b,*b,*b], *c,*c,*c,*c,*c,*c,*c,*c,*c],
      *d,*d,*d,*d,*d,*d,*d,*d,*d]
"""


def test_given_a_stored_policy_whose_problem_yaml_aliases_inflate_then_the_group_is_not_frozen(
    gpu_group: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stored policy edited in the table into 1 KB whose aliases expand to 10**4 lists
    (tmp_path / "gpu.yaml").write_text(gpu(per_node=4))
    main(["apply", "-f", str(tmp_path), *AT])
    inflated = gpu().replace("spec:\n", "spec:\n" + ALIASED_WINDOW)
    assert len(inflated) < 2_000
    gpu_group.update_item(
        TableName=TABLE,
        Key={"pk": {"S": HEADS_PK}, "sk": {"S": "gpu"}},
        UpdateExpression="SET document = :d",
        ExpressionAttributeValues={":d": {"S": inflated}},
    )
    # When the group is evaluated, twice (the first write must not freeze the next)
    scaler = evaluator(gpu_group, VirtualClock(), deployed=DEPLOYED_GPU, read=[])
    first, second = scaler.evaluate("gpu-ng", "tick-1"), scaler.evaluate("gpu-ng", "tick-2")

    # Then the deployed policy decides, the problem names the field, cut, and the state fits
    assert first.decision is not None and second.decision is not None
    assert (first.decision.desired, first.decision.policy_version) == (5, "deployed")
    (problem,) = (p for p in second.problems if "is invalid" in p)
    assert "stored policy gpu v1 is invalid: spec.scaleInWindows[0].maxNodesPerHour: " in problem
    assert "… (cut, 752," in problem and len(problem) < 1_000
    assert state_item_bytes(TABLE, "gpu-ng") < DYNAMODB_ITEM_LIMIT // 10
    capsys.readouterr()
    assert main(["status", *AT]) == 0
    assert "stored policy gpu v1 is invalid" in capsys.readouterr().out


def test_given_a_policy_document_over_the_stored_limit_then_apply_refuses_it_naming_the_file(
    table: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a valid policy padded with 70,000 characters of comments
    (tmp_path / "gpu.yaml").write_text(gpu() + "# padding\n" * 7_000)
    # When it is applied, Then it is refused: the functions would not read it
    assert main(["apply", "-f", str(tmp_path), *AT]) == 2
    assert capsys.readouterr().err.startswith(f"nodescaler apply: {tmp_path / 'gpu.yaml'}: 70,")
    assert DynamoPolicyStore(table, TABLE).heads() == []


def test_given_the_stored_policies_cannot_be_read_then_the_deployed_ones_serve_and_it_is_counted(
    gpu_group: Any,
) -> None:
    failures: list[Exception] = []
    clock = VirtualClock()
    scaler = evaluator(gpu_group, clock, deployed=DEPLOYED_GPU, read=failures)
    broken = StoredPolicies(
        DynamoPolicyStore(gpu_group, "no-such-table"), clock, on_failure=failures.append
    )
    scaler = Evaluator(**{**scaler.__dict__, "policies": PolicyBook(DEPLOYED_GPU, stored=broken)})

    result = scaler.evaluate("gpu-ng", "tick-1")
    assert result.decision is not None and result.decision.desired == 5
    assert result.problems[0].startswith(
        "stored policies could not be read (ResourceNotFoundException"
    )
    assert result.problems[0].endswith("the deployed policies are used")
    assert len(failures) == 1
    scaler.evaluate("gpu-ng", "tick-2")  # within the retry delay: not read again
    assert len(failures) == 1
    clock.advance(seconds=10)
    scaler.evaluate("gpu-ng", "tick-3")
    assert len(failures) == 2


def test_given_a_failed_read_after_a_good_one_then_the_stored_policies_last_read_still_serve(
    gpu_group: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gpu.yaml").write_text(gpu(per_node=4))
    assert main(["apply", "-f", str(tmp_path), *AT]) == 0
    failures: list[Exception] = []
    clock = VirtualClock()
    scaler = evaluator(gpu_group, clock, deployed=DEPLOYED_GPU, read=failures)
    assert scaler.evaluate("gpu-ng", "tick-1").decision.policy_version == 1  # type: ignore[union-attr]

    store = DynamoPolicyStore

    def throttled(self: Any) -> Any:
        raise RuntimeError("throttled")

    monkeypatch.setattr(store, "heads", throttled)
    clock.advance(minutes=1)  # the cache expires; the read fails
    result = scaler.evaluate("gpu-ng", "tick-2")
    assert result.decision is not None and result.decision.policy_version == 1
    assert len(failures) == 1
    assert any("those read at 12:00:00Z are used" in p for p in result.problems), result.problems


def test_given_more_changed_policies_than_one_transaction_holds_then_none_is_applied(
    table: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for index in range(51):
        name = f"p{index:02}"
        (tmp_path / f"{name}.yaml").write_text(
            policy_document(name, queue_metric("jobs", 4), max_replicas=5)
        )
    assert main(["apply", "-f", str(tmp_path), *AT]) == 2
    assert capsys.readouterr().err == (
        "nodescaler apply: 51 changed policies: at most 50 are applied together (all or none); "
        "apply them in smaller sets; nothing applied\n"
    )
    assert policy_items(table) == []
