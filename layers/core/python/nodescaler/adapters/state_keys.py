"""Where a group's state lives in the state table, and the one attribute of it the fast
path may read: written once, for the store and for the IAM statement that confines the
fast path to it (synth imports no AWS SDK)."""

from __future__ import annotations

GROUP_PK_PREFIX = "GROUP#"  # + a group's name: its state (sk STATE) and audit items
STATE_SK = "STATE"
RECHECK = "recheck"  # when its buffer's room runs short: `domain.ahead.recheck`


def group_pk(group: str) -> str:
    return f"{GROUP_PK_PREFIX}{group}"
