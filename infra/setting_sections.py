"""The sections of a deployment's settings (cdk.json's `nodescaler` object), each by
what it configures: the opt-in tags, the alarms, the VPC the evaluate function runs in,
launch backoff, the cluster's limits, access to a cluster that is not EKS, the zonal
shifts that hold groups, and draining. `settings.DeploySettings` holds them; its module
is where users import them from (`nodescaler_cdk.settings`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from nodescaler.config import (
    ArcResource,
    CapacitySettings,
    DrainSettings,
    EvaluateSettings,
    Seconds,
)
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy.parsing import worded
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

TagKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=worded(
            r"^[\w .:/=+\-@]+$",
            "a tag key of letters, digits, spaces and _ . : / = + - @",
        ),
    ),
]
# An Auto Scaling group's name as it goes into an IAM resource ARN: no wildcards.
GroupName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        pattern=worded(r"^[\w.\-]+$", "an Auto Scaling group's name: letters, digits, _ . -"),
    ),
]


def runtime_default(model: type[BaseModel], field: str) -> Any:
    """A runtime setting's default, so a default is written once (in nodescaler.config)."""
    return model.model_fields[field].default


class ContextModel(BaseModel):
    """A part of cdk.json's `nodescaler` object: camelCase keys, nothing unknown, frozen."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,  # a field's docstring is its description, for editors
    )


class TagKeys(ContextModel):
    """The ASG tags that opt a group in and configure it."""

    enabled: TagKey = TagNames.enabled
    policy: TagKey = TagNames.policy
    cluster: TagKey = TagNames.cluster
    dry_run: TagKey = TagNames.dry_run
    paused: TagKey = TagNames.paused

    def names(self) -> TagNames:
        return TagNames(self.enabled, self.policy, self.cluster, self.dry_run, self.paused)


class AlarmSettings(ContextModel):
    """Where alarms go, and when a slow or short group is worth waking someone for."""

    email: Annotated[
        str | None,
        Field(pattern=worded(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "an email address, name@domain.tld")),
    ] = None
    """The address the alarms' SNS topic mails (confirm the subscription it sends)."""
    topic_arn: Annotated[
        str | None,
        Field(
            pattern=worded(
                r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:.+$",
                "an SNS topic's ARN, arn:aws:sns:<region>:<12-digit account>:<topic>",
            )
        ),
    ] = None
    """The SNS topic the alarms notify (instead of, or beside, `email`)."""
    shortfall_minutes: Annotated[int, Field(ge=2, le=1440)] = 15
    """Minutes a group's in-service count may stay below its desired count."""
    evaluation_latency_seconds: Annotated[int, Field(ge=1, le=900)] = 60
    """Seconds from the tick or alarm to the decision, 90th percentile."""
    backoff_minutes: Annotated[int, Field(ge=5, le=1440)] = 30
    """Minutes a group (or several in turn) may stay backed off after failed launches."""


class VpcSettings(ContextModel):
    """Where the evaluate function runs when the EKS API endpoint is private."""

    subnet_ids: Annotated[
        list[
            Annotated[
                str,
                Field(
                    pattern=worded(
                        r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$",
                        "a subnet ID, subnet- and 8 or 17 hexadecimal digits",
                    )
                ),
            ]
        ],
        Field(min_length=1),
    ]
    security_group_ids: Annotated[
        list[
            Annotated[
                str,
                Field(
                    pattern=worded(
                        r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$",
                        "a security group ID, sg- and 8 or 17 hexadecimal digits",
                    )
                ),
            ]
        ],
        Field(min_length=1, max_length=5),
    ]


class BackoffSettings(ContextModel):
    """How long a group that failed to launch is left alone: doubling from `initialSeconds`
    to `maxSeconds`, forgotten `resetSeconds` after the last failure; a scale-up not in
    service after `maxProvisionSeconds` counts as a failure (Cluster Autoscaler's defaults)."""

    initial_seconds: Seconds = runtime_default(CapacitySettings, "backoff_initial_seconds")
    max_seconds: Seconds = runtime_default(CapacitySettings, "backoff_max_seconds")
    reset_seconds: Seconds = runtime_default(CapacitySettings, "backoff_reset_seconds")
    max_provision_seconds: Seconds = runtime_default(CapacitySettings, "max_provision_seconds")

    @model_validator(mode="after")
    def _doubling_upwards(self) -> Self:
        if self.max_seconds < self.initial_seconds:
            raise ValueError(
                f"maxSeconds ({self.max_seconds}) is below initialSeconds ({self.initial_seconds})"
            )
        return self


class ClusterLimits(ContextModel):
    """Ceilings on the whole cluster (every managed group together); none by default."""

    max_nodes: Annotated[int | None, Field(ge=0)] = None
    max_vcpus: Annotated[int | None, Field(ge=0)] = None
    max_memory_gib: Annotated[int | None, Field(ge=0)] = None
    # The most pods one namespace's CapacityBuffer, and all of them together, may ask room for.
    buffer_max_pods: Annotated[int, Field(ge=0, le=100_000)] = runtime_default(
        EvaluateSettings, "cluster_buffer_max_pods"
    )
    buffers_max_pods: Annotated[int, Field(ge=0, le=100_000)] = runtime_default(
        EvaluateSettings, "cluster_buffers_max_pods"
    )

    @property
    def by_size(self) -> bool:
        """Whether a node counts by its instance type's size, which is then looked up."""
        return self.max_vcpus is not None or self.max_memory_gib is not None


class KubernetesAccess(ContextModel):
    """A cluster that is not EKS (self-managed Kubernetes on EC2): the Secrets Manager
    secret holding a kubeconfig or a service account token, and, for a token alone, the
    API server it goes to and the CA that signed that server's certificate (base64 PEM).
    With an endpoint, a kubeconfig naming another server is refused at run time."""

    secret_arn: Annotated[
        str,
        Field(
            pattern=worded(
                r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+$",
                "a Secrets Manager secret's ARN, "
                "arn:aws:secretsmanager:<region>:<12-digit account>:secret:<name>",
            )
        ),
    ]
    endpoint: Annotated[
        str | None,
        Field(
            pattern=worded(
                r"^https://[^\s/]+(:\d+)?/?$",
                "the API server's https:// address, a host and an optional port, no path "
                "(https://10.0.0.10:6443)",
            )
        ),
    ] = None
    ca_bundle: Annotated[str | None, Field(max_length=8192)] = None

    @field_validator("ca_bundle")
    @classmethod
    def _a_pem_certificate(cls, data: str | None) -> str | None:
        import base64
        import binascii

        if data is not None:
            try:
                pem = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("is not base64 (give the CA's PEM, base64-encoded)") from None
            if b"-----BEGIN CERTIFICATE-----" not in pem:
                raise ValueError("holds no PEM certificate")
        return data

    @model_validator(mode="after")
    def _ca_with_its_endpoint(self) -> Self:
        if self.ca_bundle is not None and self.endpoint is None:
            raise ValueError("caBundle is given without the endpoint it is trusted for")
        return self

    def environment(self) -> dict[str, Any]:
        """The functions' settings that reach the cluster this way."""
        return {
            "kubernetes_secret": self.secret_arn,
            "kubernetes_endpoint": self.endpoint,
            "kubernetes_ca_data": self.ca_bundle,
        }


class ZonalShiftContext(ContextModel):
    """The resources whose ARC zonal shifts and autoshifts hold the groups in a zone shifted
    away, besides the EKS cluster itself: a load balancer in front of the cluster's
    workloads, say. A shift on any other resource (another team's) holds nothing."""

    resources: Annotated[list[ArcResource], Field(max_length=49)] = []
    """ARNs of the resources (a load balancer, an Auto Scaling group) whose zonal shifts
    and autoshifts hold the groups, besides the EKS cluster's own."""

    @field_validator("resources")
    @classmethod
    def _each_once(cls, resources: list[str]) -> list[str]:
        twice = sorted({r for r in resources if resources.count(r) > 1})
        if twice:
            raise ValueError(f"listed more than once: {', '.join(twice)}")
        return resources


class DrainContext(ContextModel):
    """How the drain function drains a node (it is deployed with a cluster)."""

    timeout_seconds: Annotated[int, Field(ge=10, le=840)] = runtime_default(
        DrainSettings, "drain_timeout_seconds"
    )
    max_grace_seconds: Annotated[int, Field(ge=0, le=3600)] = runtime_default(
        DrainSettings, "max_grace_seconds"
    )
    timeout_result: Literal["CONTINUE", "ABANDON"] = runtime_default(
        DrainSettings, "drain_timeout_result"
    )
