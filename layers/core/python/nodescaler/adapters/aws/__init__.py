"""Adapters that implement the ports with AWS APIs; each takes an injected boto3 client."""

from __future__ import annotations

from botocore.exceptions import ClientError


def describe_aws_error(error: Exception) -> str:
    """An AWS error in a line: its code and message, or the exception's type and text."""
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "Unknown")
        return f"{code}: {error.response.get('Error', {}).get('Message', '')}".strip()
    return f"{type(error).__name__}: {error}"
