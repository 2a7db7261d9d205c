"""The policies' JSON Schema, for editors: the committed file is the one the model
generates (as the event schemas are), `nodescaler schema` prints it, every shipped policy
is valid against it, and a misspelt field is flagged as an editor would flag it.

After changing the policy model, rewrite it with
`NODESCALER_WRITE_SCHEMAS=1 pytest tests/tools/test_policy_schema.py` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from nodescaler_cli.main import main
from nodescaler_cli.schema import SCHEMA_FILE, schema_text

REPO = Path(__file__).parents[2]
SCHEMA = REPO / SCHEMA_FILE


def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA.read_text()))


def test_the_committed_schema_is_the_one_the_model_generates() -> None:
    if os.environ.get("NODESCALER_WRITE_SCHEMAS"):
        SCHEMA.parent.mkdir(exist_ok=True)
        SCHEMA.write_text(schema_text())
    assert SCHEMA.read_text() == schema_text(), f"{SCHEMA}: see this module's docstring"


def test_nodescaler_schema_prints_the_committed_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == SCHEMA.read_text()


@pytest.mark.parametrize("path", sorted((REPO / "policies").glob("*.yaml")), ids=lambda p: p.name)
def test_each_shipped_policy_is_valid_against_the_schema(path: Path) -> None:
    validator().validate(yaml.safe_load(path.read_text()))


def test_given_a_misspelt_field_then_the_schema_flags_it_by_its_path() -> None:
    document = yaml.safe_load((REPO / "policies" / "web.yaml").read_text())
    document["spec"]["maxReplica"] = document["spec"].pop("maxReplicas")
    problems = {
        (".".join(map(str, e.absolute_path)), e.validator)
        for e in validator().iter_errors(document)
    }
    assert ("spec", "additionalProperties") in problems  # maxReplica: not a field
    assert ("spec", "required") in problems  # maxReplicas: missing
