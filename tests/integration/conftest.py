"""moto for every integration test (see tests/aws.py)."""

from tests import aws as moto_aws

aws, calls = moto_aws.aws, moto_aws.calls  # the moto fixtures
