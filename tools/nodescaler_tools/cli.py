"""The operator CLI: `nodescaler validate` and `nodescaler simulate` (more commands to come)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nodescaler.domain.documents import PolicyError
from nodescaler.policy_files import load_policies, load_policy_file

DEFAULT_POLICIES = Path("policies")


def _validate(args: argparse.Namespace) -> int:
    path: Path = args.path
    if path.is_file():
        policy = load_policy_file(path)
        print(f"{path}: policy {policy.name!r} is valid")
        return 0
    policies = load_policies(path)
    for name in sorted(policies):
        print(f"{path}: policy {name!r} is valid")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from nodescaler_tools import replay, scenarios  # imported only for this command

    if args.scenario:
        raise SystemExit(
            f"nodescaler: scenario files ({args.scenario}) are not supported yet; run without "
            "one for the built-in scenarios"
        )
    # Through the real handlers, in the sandbox (moto's server, the loopback API server).
    scenarios.queue_burst(args.policies)
    # The Kubernetes-driven ramp still replays the core alone until its sandbox scenario lands.
    replay.run(["reservation-ramp"], args.policies)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodescaler", description="Operate and try nodescaler.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate", help="validate policy documents offline (the same errors as synth)"
    )
    validate.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=DEFAULT_POLICIES,
        help="a policy file or a folder of them (default: policies/)",
    )
    validate.set_defaults(run=_validate)

    simulate = commands.add_parser(
        "simulate", help="run the scaling scenarios (what make demo runs)"
    )
    simulate.add_argument("scenario", nargs="?", help="a scenario file (needs the sandbox)")
    simulate.add_argument(
        "--policies", type=Path, default=DEFAULT_POLICIES, help="policy folder (default: policies/)"
    )
    simulate.set_defaults(run=_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except PolicyError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
