"""A scenario's fault windows (`faults:`), started and ended as the run's minutes pass,
on what the product calls:
- `cloudwatch-outage`: CloudWatch answers every call 503 ServiceUnavailable;
- `throttling` of a service: every call answered with that service's throttling error
  (the answer stands for the last of botocore's retries: none reaches moto);
- `kubernetes-down`: the loopback API server refuses connections; `kubernetes-slow`: it
  answers `seconds` late, in real time (the product's client timeout decides the rest);
- `queue-deleted`: the SQS queue is deleted with its messages (tasks sent meanwhile are
  lost) and made anew, empty, when the window ends.

AWS faults are botocore hooks on the functions' clients and on the baseline's; Cluster
Autoscaler, which reads the cluster through the API server, does nothing while it is down.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.awsrequest import AWSResponse

from nodescaler_sandbox.kube.apiserver import Fault

if TYPE_CHECKING:
    from nodescaler_sandbox.sandbox import Sandbox
    from nodescaler_sandbox.scenario_file import FaultSpec

# Each service's throttling answer, as AWS sends it: (HTTP status, error code).
THROTTLED = {
    "autoscaling": (400, "Throttling"),
    "cloudwatch": (400, "Throttling"),
    "dynamodb": (400, "ThrottlingException"),
    "ec2": (503, "RequestLimitExceeded"),
    "eks": (429, "ThrottlingException"),
    "sqs": (400, "ThrottlingException"),
}
EVENT_NAMES = {"autoscaling": "auto-scaling"}  # botocore's event names, where they differ


class Outages:
    """The fault windows of one run: `at(minute)` starts and ends them."""

    def __init__(self, faults: Sequence[FaultSpec], box: Sandbox) -> None:
        self.faults = list(faults)
        self.box = box
        self._active: dict[int, contextlib.ExitStack] = {}
        self.injected: dict[str, int] = {}  # kind → calls answered by a fault

    def watch(self, service: str, client: Any) -> Any:
        """AWS faults apply to this client's calls: before anything else answers them
        (botocore runs an operation's own hooks, the sandbox's answers for moto, first)."""
        event = f"before-call.{EVENT_NAMES.get(service, service)}"
        answer = self._aws_fault(service)
        for operation in client.meta.service_model.operation_names:
            client.meta.events.register_first(
                f"{event}.{operation}", answer, f"outage-{id(self)}-{service}-{operation}"
            )
        return client

    def at(self, minute: float) -> None:
        for index, fault in enumerate(self.faults):
            due = fault.start <= minute < fault.until
            if due and index not in self._active:
                self._active[index] = self._start(fault)
            elif not due and index in self._active:
                self._active.pop(index).close()

    def close(self) -> None:
        for stack in self._active.values():
            stack.close()
        self._active.clear()

    @property
    def kubernetes_down(self) -> bool:
        return any(self.faults[i].kind == "kubernetes-down" for i in self._active)

    def _start(self, fault: FaultSpec) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        if fault.kind == "kubernetes-down":
            stack.enter_context(self.box.api_server.failing(Fault.DOWN))
        elif fault.kind == "kubernetes-slow":
            self.box.api_server.slow_seconds = fault.seconds
            stack.enter_context(self.box.api_server.failing(Fault.SLOW))
        elif fault.kind == "queue-deleted":
            sqs = self.box.client("sqs")
            assert fault.target is not None
            sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=fault.target)["QueueUrl"])
            stack.callback(sqs.create_queue, QueueName=fault.target)
        return stack  # CloudWatch and throttling: `_aws_fault` reads the active windows

    def _aws_fault(self, service: str) -> Any:
        def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            for index in self._active:
                fault = self.faults[index]
                if fault.kind == "cloudwatch-outage" and service == "cloudwatch":
                    return self._error(fault.kind, 503, "ServiceUnavailable", "Service Unavailable")
                if fault.kind == "throttling" and fault.target == service:
                    status, code = THROTTLED[service]
                    return self._error(fault.kind, status, code, "Rate exceeded")
            return None

        return answer

    def _error(
        self, kind: str, status: int, code: str, message: str
    ) -> tuple[AWSResponse, dict[str, Any]]:
        self.injected[kind] = self.injected.get(kind, 0) + 1
        metadata = {"RequestId": str(uuid.uuid4()), "HTTPHeaders": {}, "RetryAttempts": 0}
        parsed = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": metadata | {"HTTPStatusCode": status},
        }
        return AWSResponse("https://sandbox.amazonaws.com/", status, {}, None), parsed
