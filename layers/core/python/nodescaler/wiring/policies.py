"""The policies a function reads: the deployed ones, after those `nodescaler apply` stored."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from nodescaler.adapters.aws.policy_store import DynamoPolicyStore
from nodescaler.adapters.deployed_policies import read_policies
from nodescaler.observability.reports import report_stored_policies_unreadable
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.stored_policies import StoredPolicies

if TYPE_CHECKING:
    from nodescaler.config import CapacitySettings, CommonSettings
    from nodescaler.ports import Clock
    from nodescaler.wiring.clients import AwsClients


def policy_book(settings: CommonSettings, stored: StoredPolicies | None = None) -> PolicyBook:
    """The deployed policies, and the tags that say which one a group uses; the stored
    ones, when given, go before them."""
    folder = read_policies(settings.policies_path)
    return PolicyBook(folder.policies, settings.tag_names, folder.broken, folder.unnamed, stored)


def stored_policies(
    settings: CapacitySettings, clients: AwsClients, clock: Clock
) -> StoredPolicies:
    """The policies applied with `nodescaler apply`, read from the state table at most once
    a minute; a failed read is logged and counted, and the deployed ones serve."""
    return StoredPolicies(
        DynamoPolicyStore(clients.dynamodb, settings.state_table),
        clock,
        max_staleness=timedelta(seconds=settings.stored_policy_max_staleness_seconds),
        on_failure=report_stored_policies_unreadable,
    )


def capacity_policies(settings: CapacitySettings, clients: AwsClients, clock: Clock) -> PolicyBook:
    """The policies of a function that sizes groups: the stored ones, then the deployed."""
    return policy_book(settings, stored_policies(settings, clients, clock))
