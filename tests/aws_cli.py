"""Runs an `aws <service> <operation> --option value ...` line, as the README and docs print
it, through boto3 against moto: the AWS CLI's own mapping of options to the operation's
input (kebab-case to the shape's member names, lists, integers, booleans, and structures in
the CLI's shorthand, `Key=value,Other=value`), without the CLI."""

from __future__ import annotations

import shlex
from typing import Any

from botocore import xform_name

from tests.aws import client


def run_aws(line: str) -> dict[str, Any]:
    params = run_aws_input(line)  # refuses what is not an AWS CLI line
    _, service, operation = shlex.split(line)[:3]
    aws = client(service)
    return dict(getattr(aws, xform_name(_operation_name(aws, operation)))(**params))


def run_aws_input(line: str) -> dict[str, Any]:
    """The operation's input the line stands for, as the AWS CLI would send it."""
    words = shlex.split(line)
    if words[:1] != ["aws"] or len(words) < 3:
        raise ValueError(f"not an AWS CLI line: {line}")
    service, operation, options = words[1], words[2], words[3:]
    aws = client(service)
    model = aws.meta.service_model.operation_model(_operation_name(aws, operation))
    members = {
        xform_name(name, "-"): (name, shape) for name, shape in model.input_shape.members.items()
    }
    params: dict[str, Any] = {}
    while options:
        option = options.pop(0)
        if not option.startswith("--") or option[2:] not in members:
            raise ValueError(f"{line}: {option} is not an option of {operation}")
        name, shape = members[option[2:]]
        values = []
        while options and not options[0].startswith("--"):
            values.append(options.pop(0))
        params[name] = _value(shape, values)
    return params


def _operation_name(aws: Any, operation: str) -> str:
    names = {xform_name(name, "-"): name for name in aws.meta.service_model.operation_names}
    if operation not in names:
        raise ValueError(f"aws {aws.meta.service_model.service_name}: no operation {operation}")
    return names[operation]


def _value(shape: Any, values: list[str]) -> Any:
    if shape.type_name == "list":
        return [_value(shape.member, [v]) for v in values]
    (value,) = values
    if shape.type_name == "structure":  # the CLI's shorthand: Key=value,Other=value
        pairs = dict(pair.split("=", 1) for pair in value.split(","))
        return {name: _value(shape.members[name], [text]) for name, text in pairs.items()}
    if shape.type_name in ("integer", "long"):
        return int(value)
    if shape.type_name == "boolean":
        return value.lower() == "true"
    return value
