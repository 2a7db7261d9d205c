"""Policies applied with `nodescaler apply`: versions of a document, and what each reads.

A stored policy is text, validated where it is used as a deployed file is: a document that
no longer validates (a newer nodescaler, an edited item) is never used, and says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from nodescaler.domain.policy.document import NodeGroupPolicy, reads_of
from nodescaler.domain.token_origins import TokenOrigins

# A policy is a page or two; its two items (head, version) stay far below DynamoDB's 400 KB.
MAX_DOCUMENT_CHARS = 64_000
DEPLOYED: Literal["deployed"] = "deployed"  # the version of a policy deployed with the stack

PolicyVersion = int | Literal["deployed"]


@dataclass(frozen=True)
class StoredPolicy:
    """One version of a policy document as stored; `problem` says why an item can't be read."""

    name: str
    version: int
    document: str
    applied_by: str = ""
    applied_at: datetime | None = None
    source: str = ""  # the file it was applied from
    problem: str = ""

    @property
    def label(self) -> str:
        return f"stored policy {self.name} v{self.version}"


def stored_problems(problems: Iterable[str], source: str) -> str:
    """Parse problems (`source: field: message`) as one line after the policy's label."""
    return "; ".join(p.removeprefix(f"{source}: ") for p in problems)


@dataclass(frozen=True)
class PolicyReads:
    """What a policy's metrics read that the evaluate function's rights are scoped to, as
    the documents name them (the deployed stack outputs the same for its policies)."""

    sqs_queues: frozenset[str] = frozenset()
    prometheus_workspaces: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()
    alarms: frozenset[str] = frozenset()  # the dispatch's rule hears only these alarms
    kubernetes: bool = False
    # (secret, origin) pairs a bearer token goes on; None: not said (an older stack)
    token_origins: TokenOrigins | None = frozenset()

    @classmethod
    def of(cls, policies: Iterable[NodeGroupPolicy]) -> PolicyReads:
        """What the policies read, by their metric types' descriptors."""
        policies = list(policies)
        reads = reads_of(policies)
        return cls(
            sqs_queues=reads.sqs_queues,
            prometheus_workspaces=frozenset(w for w, _ in reads.prometheus_workspaces),
            secrets=reads.secrets,
            alarms=frozenset(a for p in policies for a in p.spec.alarms),
            kubernetes=any(p.reads_kubernetes for p in policies),
            token_origins=reads.token_origins,
        )

    def as_json(self) -> dict[str, object]:
        return {
            "sqsQueues": sorted(self.sqs_queues),
            "prometheusWorkspaces": sorted(self.prometheus_workspaces),
            "secrets": sorted(self.secrets),
            "alarms": sorted(self.alarms),
            "kubernetes": self.kubernetes,
            "tokenOrigins": sorted(map(list, self.token_origins or ())),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> PolicyReads:
        def names(key: str) -> frozenset[str]:
            value = data.get(key, [])
            return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()

        return cls(
            names("sqsQueues"),
            names("prometheusWorkspaces"),
            names("secrets"),
            names("alarms"),
            data.get("kubernetes") is True,
            _pairs(data["tokenOrigins"]) if "tokenOrigins" in data else None,
        )

    def beyond(self, allowed: PolicyReads) -> list[str]:
        """What this reads that `allowed` does not: each a phrase for a warning."""
        missing = [
            *(f"SQS queue {q}" for q in sorted(self.sqs_queues - allowed.sqs_queues)),
            *(
                f"Prometheus workspace {w}"
                for w in sorted(self.prometheus_workspaces - allowed.prometheus_workspaces)
            ),
            *(f"secret {s}" for s in sorted(self.secrets - allowed.secrets)),
            *(f"alarm {a}" for a in sorted(self.alarms - allowed.alarms)),
        ]
        if self.kubernetes and not allowed.kubernetes:
            missing.append("the Kubernetes cluster")
        return missing


def _pairs(value: object) -> TokenOrigins:
    """(secret, origin) pairs as `as_json` writes them; anything else pairs nothing."""
    if not isinstance(value, list):
        return frozenset()
    return frozenset(
        (str(pair[0]), str(pair[1])) for pair in value if isinstance(pair, list) and len(pair) == 2
    )
