"""Policies as data: `apply`, `get policies`, `diff`, `history` and `rollback`.

`apply` validates every file as `nodescaler validate` does (the same errors) before it
writes anything, then stores every changed policy as a new version, all in one
transaction or none (`DynamoPolicyStore`). The functions read the stored policies within a
minute. The stack's `DeployedPolicies` output, when the stack can be read, names the
deployed policies and what they read, so `get` lists those too, `apply` warns when a
stored policy reads what the evaluate function's rights do not reach, and refuses one that
would send a bearer token to a server its secret is not deployed for.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodescaler.adapters.aws.policy_store import (
    MAX_POLICIES_PER_APPLY,
    DynamoPolicyStore,
    PolicyChange,
)
from nodescaler.domain.policy import NodeGroupPolicy, PrometheusMetric
from nodescaler.domain.policy.versions import MAX_DOCUMENT_CHARS, PolicyReads, StoredPolicy
from nodescaler.domain.token_origins import token_pairing, unbound_token
from nodescaler.errors import PolicyConflictError, PolicyError
from nodescaler.service.stored_policies import validated

from nodescaler_cli.observe import OperatorError, Target, UsageError
from nodescaler_cli.output import render
from nodescaler_cli.policy_input import Document, read_documents

DEPLOYED_OUTPUT = "DeployedPolicies"  # the stack's CfnOutput (infra/stack.py)

Write = Callable[[str], None]


def load_documents(paths: Sequence[Path]) -> list[Document]:
    """Every policy of these files and folders, validated as `nodescaler validate` does
    (nodescaler_cli.policy_input), before anything is written."""
    return read_documents(paths)


def _readable(stored: StoredPolicy) -> StoredPolicy:
    """The item, or a one-line error naming it, and what to do, when it can't be read."""
    if stored.problem:
        raise OperatorError(
            f"{stored.problem}: delete that item and apply the policy again (its versions stay)"
        )
    return stored


def _head(store: DynamoPolicyStore, name: str) -> StoredPolicy | None:
    head = store.head(name)
    return None if head is None else _readable(head)


def _known_head(store: DynamoPolicyStore, name: str) -> StoredPolicy:
    head = _head(store, name)
    if head is None:
        stored = ", ".join(sorted(h.name for h in store.heads())) or "none"
        raise OperatorError(f"no stored policy {name!r} (stored: {stored})")
    return head


def _deployed(target: Target) -> tuple[list[str], PolicyReads] | None:
    """The deployed policies' names and what they read, from the stack's output; None when
    the stack can't be read (a table named with --table alone)."""
    try:
        stacks = target.client("cloudformation").describe_stacks(StackName=target.stack)["Stacks"]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        deployed = json.loads(outputs[DEPLOYED_OUTPUT])
        return [str(n) for n in deployed["names"]], PolicyReads.from_json(deployed["reads"])
    except Exception:  # no stack, an older stack without the output: nothing to compare with
        return None


def _caller(target: Target) -> str:
    return str(target.client("sts").get_caller_identity()["Arn"])


def _write(
    store: DynamoPolicyStore, target: Target, changes: list[PolicyChange], write: Write
) -> None:
    try:
        store.apply(changes, _caller(target), datetime.now(UTC))
    except PolicyConflictError as error:
        raise OperatorError(str(error)) from None
    for change in changes:
        write(f"policy {change.name}: v{change.version} applied from {change.source}")


def apply(target: Target, paths: Sequence[Path], write: Write = print) -> int:
    documents = load_documents(paths)
    _refuse_unbound_tokens(target, documents)
    store = DynamoPolicyStore(target.client("dynamodb"), target.state_table())
    changes = []
    for document in documents:
        name = document.policy.name
        if len(document.text) > MAX_DOCUMENT_CHARS:  # the functions would refuse it
            raise UsageError(
                f"{document.source}: {len(document.text):,} characters, over the "
                f"{MAX_DOCUMENT_CHARS:,} a stored policy may hold; nothing applied"
            )
        head = _head(store, name)
        if head is not None and head.document == document.text:
            write(f"policy {name}: unchanged (v{head.version})")
            continue
        version = max(store.latest_version(name), head.version if head else 0) + 1
        changes.append(
            PolicyChange(name, version, document.text, document.source, head.version if head else 0)
        )
    if len(changes) > MAX_POLICIES_PER_APPLY:  # one transaction holds two items a policy
        raise UsageError(
            f"{len(changes)} changed policies: at most {MAX_POLICIES_PER_APPLY} are applied "
            "together (all or none); apply them in smaller sets; nothing applied"
        )
    if changes:
        _warn_beyond_rights(target, [d.policy for d in documents])
        _write(store, target, changes, write)
    return 0


def _token_sources(document: Document) -> list[tuple[str, PrometheusMetric]]:
    """The document's Prometheus metrics that send a bearer token, each with its field."""
    return [
        (f"spec.metrics[{index}].prometheus.serverAddress", metric)
        for index, metric in enumerate(document.policy.spec.metrics)
        if isinstance(metric, PrometheusMetric) and token_pairing(metric.prometheus)
    ]


def _refuse_unbound_tokens(target: Target, documents: list[Document]) -> None:
    """Evaluate sends a token only to a server its secret is deployed for (the stack's
    `DeployedPolicies`); a policy pairing them otherwise is refused before anything is
    written. A stack that does not say is only warned of: evaluate still refuses."""
    sending = [(d, field, m) for d in documents for field, m in _token_sources(d)]
    if not sending:
        return
    deployed = _deployed(target)
    allowed = deployed[1].token_origins if deployed else None
    if allowed is None:
        print(
            f"warning: stack {target.stack} does not say which servers its bearer token "
            "secrets are deployed for: a token sent to any other is refused by the evaluate "
            "function, and that metric reads as missing",
            file=sys.stderr,
        )
        return
    problems = [
        f"{document.source}: {field}: {refusal}; deploy the policy with the stack to send "
        "the token there; nothing applied"
        for document, field, metric in sending
        if (refusal := unbound_token(metric.prometheus, allowed))
    ]
    if problems:
        raise PolicyError("policies", problems)


def _warn_beyond_rights(target: Target, policies: list[NodeGroupPolicy]) -> None:
    """A warning, not an error: the operator may be about to deploy the rights too."""
    deployed = _deployed(target)
    if deployed is None:
        return
    _, allowed = deployed
    for policy in policies:
        if beyond := PolicyReads.of([policy]).beyond(allowed):
            print(
                f"warning: policy {policy.name} reads {', '.join(beyond)}, which the deployed "
                "stack does not: until the policy is deployed with it, such a metric reads as "
                "missing (no scale-in) and such an alarm triggers no evaluation",
                file=sys.stderr,
            )


def get_policies(target: Target, write: Write = print) -> int:
    store = DynamoPolicyStore(target.client("dynamodb"), target.state_table())
    rows = []
    heads = {h.name: h for h in store.heads()}
    for name, head in sorted(heads.items()):
        problem = validated(head).problem
        rows.append(
            {
                "name": name,
                "version": head.version or None,  # null: an unreadable head (see problem)
                "applied_by": head.applied_by,
                "applied_at": head.applied_at.isoformat() if head.applied_at else None,
                "source": "stored",
                "problem": f"{problem}; not used" if problem else None,
            }
        )
    deployed = _deployed(target)
    for name in sorted(set(deployed[0] if deployed else ()) - set(heads)):
        rows.append(
            {
                "name": name,
                "version": "deployed",
                "applied_by": None,
                "applied_at": None,
                "source": "deployed",
                "problem": None,
            }
        )
    if rows or target.output != "table":
        write(render("policies", rows, target.output))
    else:
        write("(no stored policies: apply one with nodescaler apply -f FILE)")
    return 0


DIFFERS = 3  # its own code: 1 and 2 mean, as for every command, an AWS problem, bad input


def diff(target: Target, paths: Sequence[Path], write: Write = print) -> int:
    """A unified diff of each stored policy against its file; DIFFERS when any differs."""
    documents = load_documents(paths)
    store = DynamoPolicyStore(target.client("dynamodb"), target.state_table())
    differs = False
    for document in documents:
        head = _head(store, document.policy.name)
        stored = head.document if head else ""
        label = f"stored/{document.policy.name}" + (f" (v{head.version})" if head else " (none)")
        lines = list(
            difflib.unified_diff(
                stored.splitlines(keepends=True),
                document.text.splitlines(keepends=True),
                fromfile=label,
                tofile=document.source,
            )
        )
        if lines:
            differs = True
            write(
                "".join(line if line.endswith("\n") else f"{line}\n" for line in lines).rstrip("\n")
            )
    return DIFFERS if differs else 0


def history(target: Target, name: str, write: Write = print) -> int:
    store = DynamoPolicyStore(target.client("dynamodb"), target.state_table())
    head = _known_head(store, name)
    rows = [
        {
            "version": _readable(v).version,
            "applied_by": v.applied_by,
            "applied_at": v.applied_at.isoformat() if v.applied_at else None,
            "source": v.source,
            "current": v.version == head.version,
        }
        for v in store.versions(name)
    ]
    write(render("versions", rows, target.output))
    return 0


def rollback(target: Target, name: str, to: int, write: Write = print) -> int:
    """A new version whose document is version `to`'s."""
    store = DynamoPolicyStore(target.client("dynamodb"), target.state_table())
    head = _known_head(store, name)
    old = store.version(name, to)
    if old is None:
        raise OperatorError(f"policy {name} has no version {to} (versions 1 to {head.version})")
    old = _readable(old)
    checked = validated(old)
    if checked.policy is None:
        raise OperatorError(f"{checked.problem}: not rolled back")
    _refuse_unbound_tokens(target, [Document(checked.policy, old.document, old.label)])
    if old.document == head.document:
        write(f"policy {name}: unchanged (v{head.version} is version {to}'s document)")
        return 0
    version = max(store.latest_version(name), head.version) + 1
    change = PolicyChange(name, version, old.document, f"rollback to v{to}", head.version)
    _write(store, target, [change], write)
    return 0


def register(
    commands: Any,
    target: Callable[[argparse.Namespace], Target],
    aws_options: Callable[[argparse.ArgumentParser], None],
    output_option: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Add the policy commands to the CLI's subparsers."""

    def files(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "-f",
            "--filename",
            dest="paths",
            type=Path,
            action="append",
            required=True,
            help="a policy file or a folder of them (repeatable)",
        )

    apply_ = commands.add_parser(
        "apply", help="validate policy files and store them, versioned (no deploy)"
    )
    files(apply_)
    aws_options(apply_)
    apply_.set_defaults(run=lambda args: apply(target(args), args.paths))

    get = commands.add_parser("get", help="list stored and deployed policies")
    get.add_argument("kind", choices=["policies"], help="what to list")
    aws_options(get)
    output_option(get)
    get.set_defaults(run=lambda args: get_policies(target(args)))

    diff_ = commands.add_parser(
        "diff", help=f"the stored policies against files (exit code {DIFFERS} when they differ)"
    )
    files(diff_)
    aws_options(diff_)
    diff_.set_defaults(run=lambda args: diff(target(args), args.paths))

    history_ = commands.add_parser("history", help="a stored policy's versions")
    history_.add_argument("name", help="the policy's name")
    aws_options(history_)
    output_option(history_)
    history_.set_defaults(run=lambda args: history(target(args), args.name))

    rollback_ = commands.add_parser(
        "rollback", help="store an earlier version's document as a policy's new version"
    )
    rollback_.add_argument("name", help="the policy's name")
    rollback_.add_argument("--to", type=int, required=True, help="the version to go back to")
    aws_options(rollback_)
    rollback_.set_defaults(run=lambda args: rollback(target(args), args.name, args.to))
