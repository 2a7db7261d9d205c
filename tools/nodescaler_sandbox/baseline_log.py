"""What the Cluster Autoscaler baseline did, in its run's log (`logs-cluster-autoscaler*.jsonl`,
where the sandbox sends what is printed during a run): a JSON line for each change of a
group's size and each node it starts deleting, removes or gives up draining, worded after
Cluster Autoscaler's own log lines (its "Scale-up: setting group ... size to ...",
"Scale-down: removing empty node ...") but not quoting them, so a reader can tell why the
baseline kept or let go a node."""

from __future__ import annotations

import json
from datetime import datetime


def say(now: datetime, message: str) -> None:
    """One line of the baseline's log, at the run's virtual time."""
    print(json.dumps({"time": now.isoformat(), "source": "cluster-autoscaler", "message": message}))
