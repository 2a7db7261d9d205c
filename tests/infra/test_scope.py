"""Which groups a deployment may resize, as synth builds it: a cluster (or `allGroups`,
said on purpose) is required, `allowedGroups` is required (names and prefixes, or `["*"]`
for any opted-in group, said on purpose), validated, and becomes the evaluate
function's IAM resources and both functions' setting, and the SCP that docs/security.md
gives for the `nodescaler/*` tag keys is a policy document that denies what it says."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pytest
from nodescaler.config import CommonSettings, DispatchSettings, EvaluateSettings
from nodescaler.domain.groups.optin import TagNames

from infra.settings import DeploySettings, SettingsError, construct_settings, load_settings
from tests.infra.stack_template import (
    environment,
    nag_findings,
    render,
    role_statements,
    statement_for,
)
from tests.infra.test_stack import CDK_CONTEXT, REPO, synth


@pytest.fixture(scope="module")
def queue_only(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A policy folder whose one policy reads a queue: nothing in it needs a cluster."""
    folder = tmp_path_factory.mktemp("policies")
    (folder / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    return str(folder)


def refusal(**overrides: Any) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings(CDK_CONTEXT | overrides, REPO)
    return str(refused.value)


def test_given_no_cluster_and_no_all_groups_then_synth_refuses_naming_deployment_and_field(
    queue_only: str,
) -> None:
    # Given cdk.json with an empty clusterName, nothing else needing a cluster; When synth
    # loads it; Then one line names the deployment and the field (it used to manage every
    # cluster's opted-in groups)
    assert refusal(clusterName="", policiesFolder=queue_only) == (
        "cdk.json: context.nodescaler.clusterName: deployment nodescaler: is empty; set the "
        "cluster whose opted-in groups it manages, or allGroups: true for the opted-in groups "
        "that name no cluster"
    )
    settings, _ = load_settings(
        CDK_CONTEXT | {"clusterName": "", "allGroups": True, "policiesFolder": queue_only}, REPO
    )
    assert (settings.cluster_name, settings.all_groups) == ("", True)


def test_given_all_groups_beside_a_cluster_then_synth_refuses_the_contradiction() -> None:
    assert refusal(allGroups=True) == (
        "cdk.json: context.nodescaler.allGroups: deployment nodescaler-my-cluster: is true, "
        "but clusterName is my-cluster, whose groups alone it manages; set one or the other"
    )


BAD_ALLOW_LISTS = [
    # (case, allowedGroups, words of the one-line refusal)
    (
        "empty",
        [],
        'allowedGroups: is empty, so no group could be resized; list the groups, or ["*"]',
    ),
    ("a star beside names", ["*", "gpu-a"], 'allowedGroups: lists "*", any group opted in'),
    (
        "a star prefix alone",
        ["**"],
        "allowedGroups[0]: '**' is neither a group's name nor a prefix",
    ),
    ("a star inside", ["prod-*-web"], "allowedGroups[0]: 'prod-*-web' is neither a group's"),
    ("a space", ["prod web"], "allowedGroups[0]: 'prod web' is neither a group's name"),
    ("twice", ["gpu-a", "gpu-a"], "allowedGroups: listed more than once: gpu-a"),
    ("not a list", "gpu-a", "allowedGroups: Input should be a valid list"),
]


@pytest.mark.parametrize(
    ("allowed", "words"), [c[1:] for c in BAD_ALLOW_LISTS], ids=[c[0] for c in BAD_ALLOW_LISTS]
)
def test_given_a_bad_allow_list_then_synth_refuses_it_in_one_line(allowed: Any, words: str) -> None:
    message = refusal(allowedGroups=allowed)
    assert "\n" not in message
    assert message.startswith("cdk.json: context.nodescaler.allowedGroups"), message
    assert words in message.replace("context.nodescaler.", "")


def arn_tail(resource: Any) -> str:
    return render(resource).split(":autoScalingGroup:*:", 1)[1]


def test_given_allowed_groups_then_evaluate_may_write_to_those_names_only_and_both_know_them() -> (
    None
):
    template = synth(allowedGroups=["prod-web-*", "gpu-a"])

    # Then the evaluate function's Auto Scaling writes name those groups' ARNs (a trailing
    # `*` is a prefix in IAM), under the same opt-in and cluster tag conditions
    resize = statement_for(role_statements(template, "evaluate"), "autoscaling:SetDesiredCapacity")
    assert sorted(arn_tail(r) for r in resize["Resource"]) == [
        "autoScalingGroupName/gpu-a",
        "autoScalingGroupName/prod-web-*",
    ]
    assert resize["Condition"] == {
        "StringEqualsIgnoreCase": {"aws:ResourceTag/nodescaler/enabled": "true"},
        "StringEquals": {"aws:ResourceTag/nodescaler/cluster": "my-cluster"},
    }
    # and dispatch and evaluate enforce the same list at run time
    for folder, model in (("dispatch", DispatchSettings), ("evaluate", EvaluateSettings)):
        variables = environment(template, folder)
        assert json.loads(variables["ALLOWED_GROUPS"]) == ["prod-web-*", "gpu-a"]
        assert model.model_fields["allowed_groups"].alias == "ALLOWED_GROUPS"


def test_given_no_allow_list_then_synth_refuses_naming_both_choices() -> None:
    # Given cdk.json without allowedGroups (tag rights would be resize rights by default)
    context = {k: v for k, v in CDK_CONTEXT.items() if k != "allowedGroups"}
    # When synth loads it (or allowedGroups is null); Then one line names the deployment,
    # the field and both choices: the groups by name or prefix, or ["*"] on purpose
    for given in (context, context | {"allowedGroups": None}):
        with pytest.raises(SettingsError) as refused:
            load_settings(given, REPO)
        assert str(refused.value) == (
            "cdk.json: context.nodescaler.allowedGroups: deployment nodescaler-my-cluster: is "
            "not set; whoever may tag an Auto Scaling group could have it resized. List the "
            'groups it may resize, names or prefixes ending in * (["prod-web-*", "gpu-a"]), '
            'or ["*"] to let it resize any group opted in for cluster my-cluster'
        )


def test_given_the_construct_without_an_allow_list_then_it_refuses_the_same_way() -> None:
    with pytest.raises(SettingsError) as refused:
        construct_settings(DeploySettings(cluster_name="prod"), [], None)
    assert str(refused.value).startswith(
        "Nodescaler: settings.allowedGroups: deployment nodescaler-prod: is not set;"
    )
    assert '["*"] to let it resize any group opted in for cluster prod' in str(refused.value)


def test_given_any_group_on_purpose_then_evaluate_may_write_to_any_opted_in_group() -> None:
    # Given allowedGroups ["*"] (the sample cdk.json's choice)
    template = synth(allowedGroups=["*"])
    # Then the writes are on any group's ARN, under the opt-in and cluster tag conditions,
    resize = statement_for(role_statements(template, "evaluate"), "autoscaling:SetDesiredCapacity")
    assert arn_tail(resize["Resource"]) == "autoScalingGroupName/*"
    assert resize["Condition"]["StringEquals"] == {
        "aws:ResourceTag/nodescaler/cluster": "my-cluster"
    }
    # and the functions are told so, and allow every group at run time
    for folder in ("dispatch", "evaluate"):
        told = environment(template, folder)["ALLOWED_GROUPS"]
        assert json.loads(told) == ["*"]
        allowed = CommonSettings.from_environment({"ALLOWED_GROUPS": told}).allowed
        assert allowed.allows("billing-workers") and allowed.allows("gpu-a")


def test_given_allowed_groups_then_cdk_nag_finds_nothing_unexplained() -> None:
    assert nag_findings(allowedGroups=["prod-web-*", "gpu-a"]) == []


def test_given_all_groups_then_iam_writes_need_the_cluster_tag_absent(queue_only: str) -> None:
    # Given a deployment of no cluster; Then IAM allows its writes only on groups with no
    # cluster tag (Null), as the functions manage them: another cluster's group is refused
    template = synth(clusterName="", allGroups=True, policiesFolder=queue_only)
    statements = role_statements(template, "evaluate")
    for action in ("autoscaling:SetDesiredCapacity", "eks:UpdateNodegroupConfig"):
        condition = statement_for(statements, action)["Condition"]
        assert condition["Null"] == {"aws:ResourceTag/nodescaler/cluster": "true"}, action
        assert "StringEquals" not in condition


# --- docs/security.md's SCP ------------------------------------------------------------------

SECURITY = REPO / "docs" / "security.md"
TAG_ACTIONS = {
    "autoscaling:CreateOrUpdateTags",
    "autoscaling:DeleteTags",
    "autoscaling:CreateAutoScalingGroup",
    "eks:TagResource",
    "eks:UntagResource",
    "eks:CreateNodegroup",
}


def security_policy() -> dict[str, Any]:
    (block,) = re.findall(r"```json\n(.*?)```", SECURITY.read_text(), flags=re.DOTALL)
    document: dict[str, Any] = json.loads(block)
    return document


def test_the_documented_scp_denies_nodescaler_tag_keys_to_all_but_named_admins() -> None:
    # Given the policy docs/security.md shows (and README links to it)
    document = security_policy()
    assert document["Version"] == "2012-10-17"
    (deny,) = document["Statement"]

    # Then it denies every way of setting or removing a tag key, on any resource ...
    assert deny["Effect"] == "Deny" and deny["Resource"] == "*"
    assert set(deny["Action"]) == TAG_ACTIONS
    # ... for a request carrying any nodescaler/* key (the default keys, each of them) ...
    (keys,) = deny["Condition"]["ForAnyValue:StringLike"]["aws:TagKeys"]
    defaults = [
        getattr(TagNames(), f) for f in ("enabled", "policy", "cluster", "dry_run", "paused")
    ]
    assert all(fnmatch.fnmatchcase(key, keys) for key in defaults)
    assert not fnmatch.fnmatchcase("team", keys)
    # ... unless the caller is a named admin role
    (admins,) = deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert re.fullmatch(r"arn:aws:iam::\*:role/[\w+=,.@-]+", admins)
    assert "docs/security.md" in (REPO / "README.md").read_text()
