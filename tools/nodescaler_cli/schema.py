"""The JSON Schema of a policy document (`NodeGroupPolicy`), generated from the model that
validates it, for editors to complete and check policies: schemas/nodegroup-policy.json
holds it, and `nodescaler schema` prints it.

A policy file names it in its first line, for the YAML language server (VS Code's YAML
extension, and editors that use it):
    # yaml-language-server: $schema=../schemas/nodegroup-policy.json
"""

from __future__ import annotations

import json
from typing import Any

from nodescaler.domain.policy import NodeGroupPolicy

SCHEMA_FILE = "schemas/nodegroup-policy.json"  # from the repository's root


def policy_schema() -> dict[str, Any]:
    """What a policy document may say: the model's fields by their YAML names, as input."""
    schema = NodeGroupPolicy.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "nodescaler NodeGroupPolicy",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(policy_schema(), indent=2) + "\n"
