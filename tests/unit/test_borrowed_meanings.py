"""Words borrowed from other tools mean what they mean there, or are refused, named.

A `priority` pattern matches a group as Cluster Autoscaler's priority expander does: a Go
(RE2) regular expression found anywhere in the group's name. kubernetes/autoscaler,
cluster-autoscaler/expander/priority/priority.go: `groupIDMatchesList` keeps a group when
`re.FindStringIndex(id) != nil` for a pattern compiled with Go's `regexp.Compile` (no
anchoring added). A fallback's `failureThreshold` counts as KEDA's does: kedacore/keda,
pkg/fallback/fallback.go, `GetMetricsWithFallback` falls back when
`*healthStatus.NumberOfFailures > scaledObject.Spec.Fallback.FailureThreshold` (more than N
failures in a row, the count reset by a success), and `validateFallback` accepts any
`FailureThreshold >= 0`.
"""

from __future__ import annotations

import json
from random import Random

import pytest
from nodescaler.config import EvaluateSettings
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.domain.scale_up.expanders import PriorityExpander, WeightedPriorityExpander
from nodescaler.domain.scale_up.pending_pods_plan import plan
from nodescaler.errors import PolicyError, SettingsError

from tests.unit.test_expanders import pods, template
from tests.unit.test_fallback import _failing, _policy

OTHER = "x"  # a group no pattern below finds: the expander's second choice

# (case, pattern, group, found in the name as CA's FindStringIndex finds it)
PRIORITY_PATTERNS = [
    ("a word anywhere in the name", "spot", "eks-spot-ng-1a", True),
    ("a prefix pattern, found mid-name", "spot-.*", "eks-spot-ng", True),
    ("a dot is any character", "t2.large", "ng-t2xlarge", True),
    ("^ anchors at the start", "^spot", "eks-spot", False),
    ("$ anchors at the end", "spot$", "spot-ng", False),
    ("^...$ is a whole-name match", "^spot-ng$", "spot-ng", True),
    ("case counts", "SPOT", "spot-ng", False),
    ("(?i) ignores case, as in RE2", "(?i)SPOT", "spot-ng", True),
    (
        "a digit class is ASCII in RE2",
        r"ng-\d",
        "ng-\u0663",
        False,
    ),  # an id mutmut can select: no backslash
    ("alternation inside a group", "(gpu|cpu)-a", "eks-gpu-a-2", True),
]


@pytest.mark.parametrize(
    ("pattern", "group", "found"),
    [c[1:] for c in PRIORITY_PATTERNS],
    ids=[c[0] for c in PRIORITY_PATTERNS],
)
@pytest.mark.parametrize("expander", ["priority", "weighted-priority"])
def test_given_a_priority_pattern_when_pods_fit_two_groups_then_it_matches_as_cas_does(
    expander: str, pattern: str, group: str, found: bool
) -> None:
    # Given the pattern at priority 10 and the other group alone at priority 1
    chain = [
        PriorityExpander({10: [pattern], 1: [f"^{OTHER}$"]})
        if expander == "priority"
        else WeightedPriorityExpander({10: {pattern: 1.0}, 1: {f"^{OTHER}$": 1.0}})
    ]
    templates = {group: template(group), OTHER: template(OTHER)}

    # When one pending pod fits both
    result = plan(pods(1), templates, chain, rng=Random(7))

    # Then the group grows exactly when CA's priority expander would have found it
    assert dict(result.nodes) == {group if found else OTHER: 1}


# (case, pattern, what RE2 lacks, as the refusal names it)
NOT_IN_RE2 = [
    ("a lookahead", "spot-(?=1a)", "a lookaround"),
    ("a negative lookahead", "(?!on-demand)ng", "a lookaround"),
    ("a lookbehind", "(?<=spot-)ng", "a lookaround"),
    ("a negative lookbehind", "(?<!on-)demand", "a lookaround"),
    ("a numbered backreference", r"(ng)-\1", "a backreference"),
    ("a named backreference", "(?P<k>ng)-(?P=k)", "a backreference"),
    ("an atomic group", "(?>spot)-ng", "an atomic group"),
    ("a conditional group", "(s)?(?(1)pot|ng)", "a conditional group"),
    ("a possessive quantifier", "spot-.*+", "a possessive quantifier"),
    ("Python's end of string", r"spot\Z", r"\Z"),
    ("the verbose flag", "(?x) spot - ng", "a flag RE2 lacks"),
]


@pytest.mark.parametrize(
    ("pattern", "lacking"), [c[1:] for c in NOT_IN_RE2], ids=[c[0] for c in NOT_IN_RE2]
)
@pytest.mark.parametrize("expander", ["priority", "weighted-priority"])
def test_given_a_pattern_go_cannot_compile_then_the_expanders_setting_is_refused_naming_it(
    expander: str, pattern: str, lacking: str
) -> None:
    # Given an expander chain whose pattern Go's regexp.Compile (RE2) would refuse
    spec = (
        {"name": "priority", "priorities": {"10": [pattern]}}
        if expander == "priority"
        else {"name": "weighted-priority", "tiers": {"10": {pattern: 1}}}
    )
    environment = {"STATE_TABLE_NAME": "nodescaler-state", "EXPANDERS": f"[{json.dumps(spec)}]"}

    # When the evaluate function (or cdk.json's expanders) reads it
    with pytest.raises(SettingsError) as refused:
        EvaluateSettings.from_environment(environment)

    # Then one line names the setting, the pattern and what RE2 lacks
    message = str(refused.value)
    assert "\n" not in message
    assert f"setting EXPANDERS[0][{expander}]" in message
    assert repr(pattern) in message and lacking in message
    assert "RE2, as Cluster Autoscaler's priority expander reads them" in message


# Patterns RE2 takes as Python does: nothing to refuse (no construct is found inside a
# character class or behind an escape).
RE2_ALIKE = [r"spot-.*", r"[(?=]spot", r"\(?=x", r"a\+\+", r"(?i)spot", r"(?P<kind>spot)-\d{2}"]


@pytest.mark.parametrize("pattern", RE2_ALIKE)
def test_given_a_pattern_re2_reads_alike_then_it_is_accepted(pattern: str) -> None:
    spec = {"name": "priority", "priorities": {"10": [pattern]}}
    environment = {"STATE_TABLE_NAME": "nodescaler-state", "EXPANDERS": f"[{json.dumps(spec)}]"}
    assert EvaluateSettings.from_environment(environment).expanders[0] is not None


# (case, failureThreshold, failed evaluations in a row, falls back: KEDA's failures > N)
FAILURE_THRESHOLDS = [
    ("at the threshold: not yet", 3, 3, False),
    ("one more than the threshold: falls back", 3, 4, True),
    ("below the threshold", 3, 2, False),
    ("threshold 1, one failure: not yet", 1, 1, False),
    ("threshold 1, two failures: falls back", 1, 2, True),
    ("threshold 0, the first failure: falls back", 0, 1, True),
]


@pytest.mark.parametrize(
    ("threshold", "failures", "falls_back"),
    [c[1:] for c in FAILURE_THRESHOLDS],
    ids=[c[0] for c in FAILURE_THRESHOLDS],
)
def test_given_a_failing_metric_then_its_fallback_applies_after_more_than_n_failures(
    threshold: int, failures: int, falls_back: bool
) -> None:
    # Given a metric with a fallback to 2 nodes, the group at 10, the live metric asking 1
    the_policy = _policy({"failureThreshold": threshold, "replicas": 2})

    # When the metric has failed `failures` evaluations in a row
    decision = _failing(the_policy, 10, jobs=1, times=failures).decision

    # Then the group falls back to 2 exactly when KEDA would, else holds (no scale-in)
    assert decision.desired == (2 if falls_back else 10)


# KEDA's field names that nodescaler spells otherwise: refused with the name to use.
KEDA_BEHAVIOR = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: batch}
spec:
  minReplicas: 0
  maxReplicas: 3
  metrics:
    - type: SQSQueue
      sqsQueue: {queue: jobs}
      target: {type: AverageValue, averageValue: 4}
      fallback: {failureThreshold: 3, replicas: 2, behavior: currentReplicasIfHigher}
"""


def test_given_kedas_fallback_behavior_field_then_the_policy_is_refused_naming_action() -> None:
    # Given a fallback written as KEDA's, with `behavior`; When it is parsed
    with pytest.raises(PolicyError) as refused:
        parse_policy(KEDA_BEHAVIOR, "policies/batch.yaml")

    # Then one line names the field and nodescaler's spelling of what KEDA's value means
    (problem,) = refused.value.problems
    assert problem.startswith("policies/batch.yaml: spec.metrics[0].fallback: "), problem
    assert "KEDA's behavior is nodescaler's action" in problem
    assert "currentReplicasIfHigher is action: ifHigher" in problem
