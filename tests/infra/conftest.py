"""The template the infra tests read (the sample context, synthesized once) and the
overrides of a stack without a cluster."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.infra.test_stack import REPO, synth


@pytest.fixture(scope="session")
def template() -> Template:
    return synth()


@pytest.fixture(scope="session")
def no_cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Overrides for a stack without a cluster: no cluster name (allGroups, said on
    purpose), a policy reading a queue."""
    folder = tmp_path_factory.mktemp("policies")
    (folder / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    return {"clusterName": "", "allGroups": True, "policiesFolder": str(folder)}
