"""Each command's --help ends with examples, as kubectl's do, and each example is a command
line the CLI takes; the AWS options are one group, each listed once."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from nodescaler_cli.main import AWS_OPTIONS, EXAMPLES, build_parser

COMMANDS = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
REPO = Path(__file__).parents[2]
AWS = ("--region", "--endpoint-url", "--table", "--deployment", "--stack", "--profile")


def help_of(name: str) -> str:
    return COMMANDS[name].format_help()


def test_every_command_has_examples() -> None:
    assert sorted(EXAMPLES) == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_help_ends_with_examples_the_cli_takes(name: str) -> None:
    text = help_of(name)
    assert "\nexamples:\n" in text
    examples = text.rsplit("\nexamples:\n", 1)[1].strip().splitlines()
    assert [line.strip() for line in examples] == list(EXAMPLES[name])
    for example in EXAMPLES[name]:
        words = shlex.split(example, comments=True)
        words = words[: words.index("|")] if "|" in words else words
        words = words[: words.index(">")] if ">" in words else words
        assert words[:2] == ["nodescaler", name]
        build_parser().parse_args(words[1:])  # argparse exits (SystemExit) on a bad one


@pytest.mark.parametrize("name", ["status", "explain", "apply", "pause"])
def test_the_aws_options_are_one_group_each_listed_once(name: str) -> None:
    options = help_of(name).split("\nexamples:\n", 1)[0].split("\n\n", 1)[1]
    group = options.split(f"\n{AWS_OPTIONS}:\n", 1)[1].split("\n\n", 1)[0]
    described = [line.split()[0] for line in options.splitlines() if line.startswith("  -")]
    for option in AWS:
        assert described.count(option) == 1, option
        assert f"\n  {option} " in f"\n{group}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_file_an_example_names_is_in_the_repository(name: str) -> None:
    for example in EXAMPLES[name]:
        for word in shlex.split(example, comments=True):
            if word.endswith((".yaml", ".json")) and "/" in word:
                assert (REPO / word).is_file(), f"{name}'s example names {word}: not there"
