"""Where stored policies live in the state table: written once, for the store and for the
IAM statements that keep the functions from writing them (synth imports no AWS SDK)."""

from __future__ import annotations

HEADS_PK = "POLICIES"  # sk: a policy's name; its current version and document
VERSIONS_PK_PREFIX = "POLICY#"  # + a policy's name; sk: VERSION#<000001>, every version


def versions_pk(name: str) -> str:
    return f"{VERSIONS_PK_PREFIX}{name}"
