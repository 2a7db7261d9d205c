"""The one DynamoDB table holding each node group's state and the decision audit trail."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

# Audit items carry an epoch-seconds expiry in this attribute; DynamoDB deletes them.
TTL_ATTRIBUTE = "expires_at"


class StateTable(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, deletion_protection: bool) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            deletion_protection=deletion_protection,
            # Keep the history and audit trail if the stack is deleted by mistake.
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else RemovalPolicy.DESTROY,
        )
