"""Which policy a group uses, when some deployed policy files are broken: only the groups
that name a broken policy are rejected, each told why; every other group keeps its policy."""

from __future__ import annotations

from pathlib import Path

from nodescaler.adapters.deployed_policies import read_policies
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.service.policy_resolver import PolicyBook

from tests.unit.test_policy_documents import VALID


def group(name: str, policy: str) -> NodeGroup:
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": policy}
    return NodeGroup(name, desired=1, min_size=0, max_size=10, in_service=1, tags=tags)


def book(folder: Path) -> PolicyBook:
    read = read_policies(folder)
    return PolicyBook(read.policies, broken=read.broken, unnamed=read.unnamed)


def test_a_broken_file_rejects_only_the_groups_that_name_its_policy(tmp_path: Path) -> None:
    (tmp_path / "batch.yaml").write_text(VALID)
    (tmp_path / "web.yaml").write_text(
        VALID.replace("name: batch", "name: web").replace("maxReplicas: 10", "maxReplicas: 0")
    )
    policies = book(tmp_path)

    assert policies.policy_of(group("jobs", "batch")) is not None
    web = policies.choose(group("frontend", "web"))
    assert web.policy is None
    assert web.problems == (
        "node group frontend: tag nodescaler/policy='web' names a deployed policy that can't "
        "be used",
        f"{tmp_path / 'web.yaml'}: spec.maxReplicas: Input should be greater than or equal to 1",
    )


def test_an_unreadable_file_is_named_to_the_groups_whose_policy_is_missing(
    tmp_path: Path,
) -> None:
    (tmp_path / "batch.yaml").write_text(VALID)
    (tmp_path / "mangled.yaml").write_text("metadata: {name: [web\n")
    policies = book(tmp_path)

    assert policies.policy_of(group("jobs", "batch")) is not None
    (said, why) = policies.choose(group("frontend", "web")).problems
    assert said == (
        "node group frontend: tag nodescaler/policy='web' names no deployed policy "
        "(deployed: batch); some policy files can't be read"
    )
    assert why.startswith(f"{tmp_path / 'mangled.yaml'}: line 2, column 1: ")


def test_one_name_in_two_files_uses_neither(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(VALID)
    (tmp_path / "b.yaml").write_text(VALID.replace("maxReplicas: 10", "maxReplicas: 20"))
    choice = book(tmp_path).choose(group("jobs", "batch"))
    assert choice.policy is None
    assert (
        f"{tmp_path / 'b.yaml'}: metadata.name: policy 'batch' is already defined"
        in (choice.problems[1])
    )


def test_a_good_folder_has_nothing_broken() -> None:
    read = read_policies(Path(__file__).resolve().parents[2] / "policies")
    assert (sorted(read.policies), read.broken, read.unnamed) == (
        [
            "business-hours",
            "gpu-training",
            "microservices",
            "prometheus-queue",
            "web",
            "web-predictive",
            "web-warm",
        ],
        {},
        (),
    )
