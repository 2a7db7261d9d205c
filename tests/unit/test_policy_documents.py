"""Policy documents: the samples load, defaults resolve, and each bad policy gives one clear error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from nodescaler.adapters.deployed_policies import load_policies
from nodescaler.domain.policy import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    METRIC_TYPES,
    SelectPolicy,
)
from nodescaler.domain.policy.parsing import field_path, parse_policy
from nodescaler.errors import PolicyError

REPO = Path(__file__).resolve().parents[2]

VALID = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: batch}
spec:
  minReplicas: 0
  maxReplicas: 10
  metrics:
    - type: SQSQueue
      sqsQueue: {queue: jobs}
      target: {type: AverageValue, averageValue: 4}
"""


def _with(spec_yaml: str) -> str:
    """A valid document whose spec is replaced by `spec_yaml`."""
    head = VALID.split("spec:", maxsplit=1)[0]
    return head + "spec:\n" + textwrap.indent(textwrap.dedent(spec_yaml), "  ")


def _forecast_from(fields: str) -> str:
    """A document whose one metric forecasts from a named metric, with `fields` beside it."""
    return _with(f"""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Predictive
            predictive:
              timeZone: Europe/Paris
              cloudWatch: {{metric: {{namespace: App, metricName: Requests}}, {fields}}}
        """)


QUEUE = """\
metrics:
  - type: SQSQueue
    sqsQueue: {queue: jobs}
    target: {type: AverageValue, averageValue: 4}
"""

BAD_POLICIES = [
    # (case, document, field path, words the message must contain)
    (
        "unknown consolidation",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: PendingPods
            pendingPods: {consolidation: Never}
        """),
        "spec.metrics[0].pendingPods.consolidation",
        "'WhenEmpty' or 'WhenEmptyOrUnderutilized'",
    ),
    (
        "a buffer of a wrong resource",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: PendingPods
            pendingPods: {buffer: [{pods: 4, requests: {disk: 1Gi}}]}
        """),
        "spec.metrics[0].pendingPods.buffer[0].requests",
        "a buffer's pods request cpu, memory or an extended resource",
    ),
    (
        "a forecast in an unknown zone",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Predictive
            predictive: {mode: ForecastAndScale, timeZone: Mars/Olympus}
        """),
        "spec.metrics[0].predictive.timeZone",
        "unknown time zone 'Mars/Olympus'",
    ),
    (
        "min above max",
        _with("minReplicas: 5\nmaxReplicas: 3\n" + QUEUE),
        "spec.maxReplicas",
        "below minReplicas (5)",
    ),
    (
        "zero target",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: SQSQueue
            sqsQueue: {queue: jobs}
            target: {type: AverageValue, averageValue: 0}
        """),
        "spec.metrics[0].target.averageValue",
        "greater than 0",
    ),
    (
        "negative target",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: CloudWatch
            cloudWatch: {metric: {namespace: App, metricName: Depth}}
            target: {type: Value, value: -2}
        """),
        "spec.metrics[0].target.value",
        "greater than 0",
    ),
    (
        "unknown metric type",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Datadog
            target: {type: Value, value: 1}
        """),
        "spec.metrics[0]",
        "unknown metric type 'Datadog'",
    ),
    (
        "unknown field",
        _with("minReplicas: 0\nmaxReplicas: 3\nmaxSurge: 2\n" + QUEUE),
        "spec.maxSurge",
        "unknown field",
    ),
    (
        "unknown nested field",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: SQSQueue
            sqsQueue: {queue: jobs, region: eu-west-1}
            target: {type: AverageValue, averageValue: 4}
        """),
        "spec.metrics[0].sqsQueue.region",
        "unknown field",
    ),
    (
        "Utilization on a queue",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: SQSQueue
            sqsQueue: {queue: jobs}
            target: {type: Utilization, averageUtilization: 50}
        """),
        "spec.metrics[0].target",
        "Utilization is not valid for a SQSQueue metric",
    ),
    (
        "target field of another type",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: SQSQueue
            sqsQueue: {queue: jobs}
            target: {type: AverageValue, value: 4}
        """),
        "spec.metrics[0].target",
        "needs averageValue",
    ),
    (
        "periodSeconds zero",
        _with(
            "minReplicas: 0\nmaxReplicas: 3\n"
            + QUEUE
            + """\
behavior:
  scaleUp:
    policies: [{type: Replicas, value: 4, periodSeconds: 0}]
"""
        ),
        "spec.behavior.scaleUp.policies[0].periodSeconds",
        "greater than or equal to 1",
    ),
    (
        "periodSeconds above 1800",
        _with(
            "minReplicas: 0\nmaxReplicas: 3\n"
            + QUEUE
            + """\
behavior:
  scaleDown:
    policies: [{type: Percent, value: 10, periodSeconds: 1801}]
"""
        ),
        "spec.behavior.scaleDown.policies[0].periodSeconds",
        "less than or equal to 1800",
    ),
    (
        "stabilization above 3600",
        _with(
            "minReplicas: 0\nmaxReplicas: 3\n"
            + QUEUE
            + """\
behavior:
  scaleDown: {stabilizationWindowSeconds: 3601}
"""
        ),
        "spec.behavior.scaleDown.stabilizationWindowSeconds",
        "less than or equal to 3600",
    ),
    (
        "negative stabilization",
        _with(
            "minReplicas: 0\nmaxReplicas: 3\n"
            + QUEUE
            + """\
behavior:
  scaleUp: {stabilizationWindowSeconds: -1}
"""
        ),
        "spec.behavior.scaleUp.stabilizationWindowSeconds",
        "greater than or equal to 0",
    ),
    (
        "unknown selectPolicy",
        _with(
            "minReplicas: 0\nmaxReplicas: 3\n"
            + QUEUE
            + """\
behavior:
  scaleUp: {selectPolicy: Average}
"""
        ),
        "spec.behavior.scaleUp.selectPolicy",
        "'Max', 'Min' or 'Disabled'",
    ),
    (
        "malformed cron",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Schedule
            schedule:
              entries: [{start: "0 25 * * *", end: "0 18 * * *", replicas: 3}]
        """),
        "spec.metrics[0].schedule.entries[0].start",
        "cron expression '0 25 * * *': hour 25 out of range (0-23)",
    ),
    (
        "cron with six fields",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Schedule
            schedule:
              entries: [{start: "0 0 8 * * *", end: "0 18 * * *", replicas: 3}]
        """),
        "spec.metrics[0].schedule.entries[0].start",
        "cron expression '0 0 8 * * *': has 6 fields, expected 5 (minute hour",
    ),
    (
        "unknown time zone",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Schedule
            schedule:
              timeZone: Europe/Atlantis
              entries: [{start: "0 8 * * *", end: "0 18 * * *", replicas: 3}]
        """),
        "spec.metrics[0].schedule.timeZone",
        "unknown time zone 'Europe/Atlantis'",
    ),
    (
        "duplicate metric names",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: SQSQueue
            name: jobs
            sqsQueue: {queue: a}
            target: {type: AverageValue, averageValue: 4}
          - type: SQSQueue
            name: jobs
            sqsQueue: {queue: b}
            target: {type: AverageValue, averageValue: 4}
        """),
        "spec.metrics",
        "duplicate metric name 'jobs' (metrics[0] and metrics[1])",
    ),
    (
        "duplicate default names",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - {type: CapacityReservation, capacityReservation: {resource: cpu}, target: {type: Utilization, averageUtilization: 60}}
          - {type: CapacityReservation, capacityReservation: {resource: cpu}, target: {type: Utilization, averageUtilization: 70}}
        """),
        "spec.metrics",
        "duplicate metric name 'reservation-cpu'",
    ),
    (
        "cloudwatch without metric or expression",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: CloudWatch
            cloudWatch: {periodSeconds: 60}
            target: {type: Value, value: 1}
        """),
        "spec.metrics[0].cloudWatch",
        "exactly one of metric or expression",
    ),
    (
        "unknown statistic",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: CloudWatch
            cloudWatch: {metric: {namespace: App, metricName: Depth, statistic: Mean}}
            target: {type: Value, value: 1}
        """),
        "spec.metrics[0].cloudWatch.metric.statistic",
        "unknown statistic 'Mean'",
    ),
    (
        "a forecast's metric with no node's worth of it",
        _forecast_from("perNode: 0"),
        "spec.metrics[0].predictive.cloudWatch.perNode",
        "greater than 0",
    ),
    (
        "a forecast's metric with an infinite node's worth",
        _forecast_from("perNode: .inf"),
        "spec.metrics[0].predictive.cloudWatch.perNode",
        "finite number",
    ),
    (
        "a forecast's metric read each minute",
        _forecast_from("perNode: 50, periodSeconds: 60"),
        "spec.metrics[0].predictive.cloudWatch.periodSeconds",
        "periodSeconds must be 300",
    ),
    (
        "a forecast's metric with metric math",
        _forecast_from("perNode: 50, expression: m1"),
        "spec.metrics[0].predictive.cloudWatch.expression",
        "unknown field",
    ),
    (
        "utilization above 100",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - {type: CapacityReservation, capacityReservation: {resource: memory}, target: {type: Utilization, averageUtilization: 120}}
        """),
        "spec.metrics[0].target.averageUtilization",
        "less than or equal to 100",
    ),
    (
        "negative minReplicas",
        _with("minReplicas: -1\nmaxReplicas: 3\n" + QUEUE),
        "spec.minReplicas",
        "greater than or equal to 0",
    ),
    (
        "no metrics",
        _with("minReplicas: 0\nmaxReplicas: 3\nmetrics: []\n"),
        "spec.metrics",
        "at least 1 item",
    ),
    (
        "bad name",
        VALID.replace("name: batch", "name: Batch_Jobs"),
        "metadata.name",
        "should be a name of at most 63 lowercase letters",
    ),
    (
        "wrong kind",
        VALID.replace("kind: NodeGroupPolicy", "kind: HorizontalPodAutoscaler"),
        "kind",
        "'NodeGroupPolicy'",
    ),
    (
        "duplicate YAML key",
        VALID.replace("  minReplicas: 0\n", "  minReplicas: 0\n  minReplicas: 1\n"),
        "line 6, column 3",
        "key 'minReplicas' is given twice",
    ),
    (
        "a cron that never fires",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Schedule
            schedule:
              entries: [{start: "0 8 * * *", end: "0 0 30 2 *", replicas: 3}]
        """),
        "spec.metrics[0].schedule.entries[0].end",
        "'0 0 30 2 *' does not fire every year",
    ),
    (
        "a cron that fires only in leap years",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Schedule
            schedule:
              entries: [{start: "0 0 29 2 *", end: "0 18 * * *", replicas: 3}]
        """),
        "spec.metrics[0].schedule.entries[0].start",
        "does not fire every year",
    ),
    *(
        (
            f"a fallback: {case}",
            _with(
                "minReplicas: 0\nmaxReplicas: 3\n"
                + QUEUE
                + f"    fallback: {{failureThreshold: {threshold}, {given}}}\n"
            ),
            "spec.metrics[0].fallback" + field,
            words,
        )
        for case, threshold, given, field, words in [
            (
                "both replicas and action",
                3,
                "replicas: 2, action: currentReplicas",
                "",
                "give replicas or action, not both: action currentReplicas takes no replicas",
            ),
            ("neither replicas nor action", 3, "", "", "give replicas (a fixed size) or action"),
            ("ifHigher without replicas", 3, "action: ifHigher", "", "ifHigher needs replicas"),
            (
                "a negative threshold",
                -1,
                "replicas: 2",
                ".failureThreshold",
                "greater than or equal to 0",
            ),
            ("negative replicas", 3, "replicas: -1", ".replicas", "greater than or equal to 0"),
            (
                "an unknown action",
                3,
                "action: scaleIn",
                ".action",
                "'hold', 'currentReplicas' or 'ifHigher'",
            ),
        ]
    ),
    (
        "a fallback without a threshold",
        _with("minReplicas: 0\nmaxReplicas: 3\n" + QUEUE + "    fallback: {replicas: 2}\n"),
        "spec.metrics[0].fallback.failureThreshold",
        "required field is missing",
    ),
    (
        "a forecast with a fallback",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: Predictive
            fallback: {failureThreshold: 3, replicas: 2}
        """),
        "spec.metrics[0]",
        "metric 'predictive': a forecast never fails (it abstains), so it takes no fallback",
    ),
    (
        "stale sooner than its CloudWatch period",
        _with("""\
        minReplicas: 0
        maxReplicas: 3
        metrics:
          - type: CloudWatch
            name: errors
            cloudWatch:
              metric: {namespace: App, metricName: Errors, statistic: Sum}
              periodSeconds: 300
            target: {type: Value, value: 10}
            staleAfterSeconds: 120
        """),
        "spec.metrics[0]",
        "metric 'errors': staleAfterSeconds (120) is shorter than its cloudWatch.periodSeconds "
        "(300): a reading is dated at the start of its period, so it would always be stale; "
        "give staleAfterSeconds 300 or more",
    ),
    (
        "a boolean for a number",
        _with("minReplicas: true\nmaxReplicas: 3\n" + QUEUE),
        "spec.minReplicas",
        "valid integer",
    ),
    (
        "a string for a number",
        _with("minReplicas: '1'\nmaxReplicas: 3\n" + QUEUE),
        "spec.minReplicas",
        "valid integer",
    ),
    (
        "a boolean for a target",
        _with(
            QUEUE.replace("averageValue: 4", "averageValue: true")
            + "minReplicas: 0\nmaxReplicas: 3\n"
        ),
        "spec.metrics[0].target.averageValue",
        "valid number",
    ),
    (
        "a number for a flag",
        _with(
            QUEUE.replace("{queue: jobs}", "{queue: jobs, includeDelayed: 1}")
            + "minReplicas: 0\nmaxReplicas: 3\n"
        ),
        "spec.metrics[0].sqsQueue.includeDelayed",
        "valid boolean",
    ),
    (
        "nested 500 deep",
        "metadata: " + "[" * 500 + "]" * 500 + "\n",
        "line 1, column 42",
        "nested more than 32 levels deep",
    ),
    ("a list as a key", "? [a, b]\n: 1\n", "line 1, column 3", "a key must be a plain name"),
    ("not YAML", "spec: [unclosed\n", "line 2, column 1", "expected"),
    ("empty document", "", "(document)", "got empty"),
    ("a list, not a mapping", "- 1\n- 2\n", "(document)", "got a list"),
]


@pytest.mark.parametrize(
    ("document", "path", "words"), [c[1:] for c in BAD_POLICIES], ids=[c[0] for c in BAD_POLICIES]
)
def test_given_a_bad_policy_when_parsed_then_one_error_names_the_file_and_field(
    document: str, path: str, words: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document, "policies/batch.yaml")
    assert len(caught.value.problems) == 1, caught.value.problems
    problem = caught.value.problems[0]
    assert problem.startswith(f"policies/batch.yaml: {path}: "), problem
    assert words in problem


def test_given_the_valid_base_document_then_it_parses() -> None:
    # The bad cases above differ from this one by one defect each.
    assert parse_policy(VALID, "batch.yaml").spec.metrics[0].key == "sqs-queue"


def test_given_the_repository_policies_then_all_load() -> None:
    assert set(load_policies(REPO / "policies")) == {
        "gpu-training",
        "microservices",
        "business-hours",
        "web",
        "web-predictive",
        "prometheus-queue",
        "web-warm",
    }


def test_given_a_folder_with_several_bad_files_then_every_problem_is_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.yaml").write_text(VALID.replace("maxReplicas: 10", "maxReplicas: 0"))
    (tmp_path / "b.yml").write_text("spec: [")
    (tmp_path / "notes.txt").write_text("ignored: not a policy")
    with pytest.raises(PolicyError) as caught:
        load_policies(tmp_path)
    assert [p.split(":")[0] for p in caught.value.problems] == [
        str(tmp_path / "a.yaml"),
        str(tmp_path / "b.yml"),
    ]


def test_given_two_files_with_one_policy_name_then_the_second_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(VALID)
    (tmp_path / "b.yaml").write_text(VALID)
    with pytest.raises(
        PolicyError, match=r"b.yaml: metadata.name: policy 'batch' is already defined in .*a.yaml"
    ):
        load_policies(tmp_path)


def test_given_no_behavior_then_the_node_defaults_apply() -> None:
    behavior = parse_policy(VALID, "batch.yaml").spec.behavior
    assert behavior.up == DEFAULT_SCALE_UP
    assert behavior.down == DEFAULT_SCALE_DOWN
    assert behavior.down.stabilization_window_seconds == 600
    assert behavior.up.tolerance == behavior.down.tolerance == 0.1


def test_given_a_partial_behavior_then_unset_fields_keep_their_defaults() -> None:
    document = _with(
        "minReplicas: 0\nmaxReplicas: 3\n"
        + QUEUE
        + """\
behavior:
  scaleDown: {selectPolicy: Disabled, tolerance: 0.05}
"""
    )
    down = parse_policy(document, "batch.yaml").spec.behavior.down
    assert down.select_policy is SelectPolicy.DISABLED
    assert down.tolerance == 0.05
    assert down.stabilization_window_seconds == DEFAULT_SCALE_DOWN.stabilization_window_seconds
    assert down.policies == DEFAULT_SCALE_DOWN.policies


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "metrics", 0, "SQSQueue", "target"), "spec.metrics[0].target"),
        (
            ("spec", "behavior", "scaleUp", "policies", 1, "value"),
            "spec.behavior.scaleUp.policies[1].value",
        ),
        ((), "(document)"),
    ],
)
def test_field_paths_leave_out_the_union_tag(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def problems(text: str) -> tuple[str, tuple[str, ...]]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, "p.yaml")
    return raised.value.source, raised.value.problems


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            VALID.replace("minReplicas: 0", "minReplicas: 0\n  colour: red"),
            "p.yaml: spec.colour: unknown field",
        ),
        (
            VALID.replace("  maxReplicas: 10\n", ""),
            "p.yaml: spec.maxReplicas: required field is missing",
        ),
        (
            VALID.replace("type: SQSQueue", "type: Kafka"),
            "p.yaml: spec.metrics[0]: unknown metric type 'Kafka' (use one of "
            + ", ".join(METRIC_TYPES)
            + ")",
        ),
        (
            "spec: [\n",
            "p.yaml: line 2, column 1: expected the node content, but found '<stream end>'",
        ),
        ("", "p.yaml: (document): expected a NodeGroupPolicy mapping, got empty"),
        ("- 1\n", "p.yaml: (document): expected a NodeGroupPolicy mapping, got a list"),
        (
            "a: 1\n\x00",
            "p.yaml: (document): unacceptable character #x0000: special characters "
            'are not allowed in "<unicode string>", position 5',  # one line, as said
        ),
    ],
)
def test_each_problem_is_one_exact_line_naming_the_file_and_where(text: str, problem: str) -> None:
    assert problems(text) == ("p.yaml", (problem,))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (  # a typo: the field it may be
            VALID.replace("averageValue", "averageVaule"),
            "p.yaml: spec.metrics[0].target.averageVaule: unknown field (did you mean "
            "averageValue?)",
        ),
        (  # a duration where seconds go: the unit said
            VALID.replace(
                "minReplicas: 0",
                "minReplicas: 0\n  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 2m",
            ),
            "p.yaml: spec.behavior.scaleDown.stabilizationWindowSeconds: should be a whole "
            "number of seconds (120 for two minutes); got '2m'",
        ),
        (  # a name: in words, not a regular expression
            VALID.replace("name: batch", "name: Batch_Jobs"),
            "p.yaml: metadata.name: should be a name of at most 63 lowercase letters, digits "
            "and '-', starting and ending with a letter or digit (a Kubernetes object's name); "
            "got 'Batch_Jobs'",
        ),
    ],
)
def test_a_problem_a_person_can_fix_says_how(text: str, problem: str) -> None:
    assert problems(text) == ("p.yaml", (problem,))


def test_a_validators_own_message_is_shown_without_pydantics_prefix() -> None:
    _, (problem,) = problems(VALID.replace("minReplicas: 0", "minReplicas: 20"))
    assert problem == "p.yaml: spec.maxReplicas: maxReplicas (10) is below minReplicas (20)"


def test_given_a_folder_file_of_two_documents_then_synth_and_the_functions_read_both(
    tmp_path: Path,
) -> None:
    from nodescaler.adapters.deployed_policies import read_policies

    # Given a folder file of two policies, the second with a typo, and a trailing `---`
    good = VALID.replace("name: batch", "name: gpu")
    (tmp_path / "all.yaml").write_text(f"{good}---\n{VALID}---\n")
    # Then synth's strict read takes both
    assert sorted(load_policies(tmp_path)) == ["batch", "gpu"]
    # And a broken second document sets aside its own policy alone, by name
    (tmp_path / "all.yaml").write_text(f"{good}---\n{VALID.replace('maxReplicas', 'maxReplica')}")
    folder = read_policies(tmp_path)
    assert list(folder.policies) == ["gpu"]
    assert (
        f"{tmp_path / 'all.yaml'} (document 2): spec.maxReplica: unknown field (did you mean maxReplicas?)"
        in (folder.broken["batch"])
    )
