"""Adapters that implement the ports with AWS APIs; each takes an injected boto3 client."""
