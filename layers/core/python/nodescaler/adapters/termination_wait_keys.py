"""Where the termination policy's waits live in the state table: a partition of their own
for each group, `TERMINATION-WAIT#<group>`, so that IAM can confine the terminate function
to them (`dynamodb:LeadingKeys`) and keep it from each group's state and audit items, which
sit under `GROUP#<group>`. Written once, for the store and for the IAM statement (synth
imports no AWS SDK)."""

from __future__ import annotations

WAITS_PK_PREFIX = "TERMINATION-WAIT#"  # + a group's name; sk: the cause (SCALE_IN, ...)


def waits_pk(group: str) -> str:
    return f"{WAITS_PK_PREFIX}{group}"
