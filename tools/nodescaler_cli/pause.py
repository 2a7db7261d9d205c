"""`nodescaler pause` and `nodescaler resume`: hold a group's scaling, stored in its state.

The pause is kept in the group's state item (who, from STS; why; when; which way; until
when) and written alone, so it never overwrites what an evaluation saves. Every check runs
before the write: an unknown group, a bad duration or both directions write nothing.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nodescaler.domain.groups.optin import PauseDirection, is_managed, read_opt_in
from nodescaler.domain.scaling.pause import Pause, parse_duration

if TYPE_CHECKING:  # boto3 is loaded by the commands that call AWS, not by the parser
    from nodescaler_cli.observe import Target


def pause(
    target: Target,
    group: str,
    *,
    direction: PauseDirection,
    duration: str | None,
    reason: str,
    write: Callable[[str], None] = print,
) -> int:
    from nodescaler_cli.observe import UsageError

    try:
        length = None if duration is None else parse_duration(duration)
    except ValueError as error:
        raise UsageError(f"--for {error}; nothing paused") from None
    _managed_group(target, group)
    who = target.client("sts").get_caller_identity()["Arn"]
    now = datetime.now(UTC)
    stored = Pause(
        direction=direction,
        by=str(who),
        reason=reason,
        at=now,
        until=None if length is None else now + length,
    )
    target.store().pause(group, stored)
    write(f"node group {group}: {stored.describe()}")
    return 0


def resume(target: Target, group: str, write: Callable[[str], None] = print) -> int:
    from nodescaler_cli.observe import OperatorError

    found = target.node_groups().get(group)
    if found is None:
        raise OperatorError(f"node group {group}: no such Auto Scaling group; nothing resumed")
    removed = target.store().resume(group)
    tags = target.tag_names
    tagged = read_opt_in(group, found.tags, tags).paused is not None
    by_tag = f"its tag {tags.paused}; remove the tag to resume it"
    if removed is None:
        if tagged:
            raise OperatorError(
                f"node group {group}: not paused by nodescaler pause, but by {by_tag}"
            )
        raise OperatorError(f"node group {group}: not paused; nothing to resume")
    expired = removed.until is not None and removed.until <= datetime.now(UTC)
    was = f"was {removed.describe()}" + (", already expired" if expired else "")
    still = f"; still paused by {by_tag}" if tagged else ""
    write(f"node group {group}: resumed ({was}){still}")
    return 0


def _managed_group(target: Target, group: str) -> None:
    """The group must be one nodescaler manages: a pause of anything else would do nothing."""
    from nodescaler_cli.observe import OperatorError

    tags = target.tag_names
    found = target.node_groups().get(group)
    if found is None:
        raise OperatorError(f"node group {group}: no such Auto Scaling group; nothing paused")
    if not is_managed(found.tags, tags, target.cluster_name):
        cluster = f" and {tags.cluster}={target.cluster_name}" if target.cluster_name else ""
        raise OperatorError(
            f"node group {group}: not opted in (no tag {tags.enabled}=true{cluster}), so "
            "nodescaler does not scale it; nothing paused"
        )


def _pause(args: argparse.Namespace) -> int:
    from nodescaler_cli.main import _target
    from nodescaler_cli.observe import UsageError

    if args.scale_in and args.scale_out:
        raise UsageError(
            "--scale-in and --scale-out together: leave both out to pause both ways; nothing paused"
        )
    direction = (
        PauseDirection.SCALE_IN
        if args.scale_in
        else PauseDirection.SCALE_OUT
        if args.scale_out
        else PauseDirection.BOTH
    )
    return pause(
        _target(args), args.group, direction=direction, duration=args.duration, reason=args.reason
    )


def _resume(args: argparse.Namespace) -> int:
    from nodescaler_cli.main import _target

    return resume(_target(args), args.group)


def register(commands: Any) -> None:
    from nodescaler_cli.main import _aws_options as aws_options

    paused = commands.add_parser(
        "pause",
        help="hold a group's scaling (both ways, or only scale-in or scale-out) until resumed "
        "or for a while",
    )
    paused.add_argument("group", help="the Auto Scaling Group's name")
    paused.add_argument("--scale-in", action="store_true", help="hold only scale-in")
    paused.add_argument("--scale-out", action="store_true", help="hold only scale-out")
    paused.add_argument(
        "--for",
        dest="duration",
        metavar="DURATION",
        help="expire after this long: 90s, 30m, 2h, 1d, 1h30m (default: until resumed)",
    )
    paused.add_argument("--reason", default="", help="why, shown with the pause")
    # "--for -5m" is a value to refuse in one line, not a missing one (Python 3.13's argparse
    # reads anything from "-<digit>" as a value; 3.11's only negative numbers).
    paused._negative_number_matcher = re.compile(r"^-\.?\d")
    aws_options(paused)
    paused.set_defaults(run=_pause)

    resumed = commands.add_parser(
        "resume", help="remove a group's pause (exits 1 if it has none to remove)"
    )
    resumed.add_argument("group", help="the Auto Scaling Group's name")
    aws_options(resumed)
    resumed.set_defaults(run=_resume)
