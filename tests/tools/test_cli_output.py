"""What a read command prints as JSON or YAML, given names and texts from outside (an Auto
Scaling group's name may hold any character but a control one): the same data, shown
inert on a terminal."""

from __future__ import annotations

import json

import pytest
import yaml
from nodescaler_cli.output import render

HOSTILE = {"group": "web\u202egnp.exe", "note": "a\x1b[2Jb\u2066", "owner": "café"}


@pytest.mark.parametrize(("output", "load"), [("json", json.loads), ("yaml", yaml.safe_load)])
def test_a_bidi_override_in_a_name_is_printed_escaped_and_reads_back_the_same(
    output: str, load: object
) -> None:
    # Given a group whose name holds a right-to-left override, and a note an escape
    # When status prints it as JSON or YAML
    text = render("groups", [HOSTILE], output)
    # Then no character a terminal would act on is printed, and a script reads the same data
    assert all(c.isprintable() or c == "\n" for c in text), repr(text)
    assert load(text) == {"groups": [HOSTILE]}  # type: ignore[operator]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_names_in_other_alphabets_are_printed_as_written(output: str) -> None:
    assert "café" in render("groups", [{"owner": "café"}], output)
