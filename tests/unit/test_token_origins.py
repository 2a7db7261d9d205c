"""A bearer token is bound to the origin (scheme, host, port) its secret was deployed with:
origins compared as browsers compare them, and any other pairing refused in one line."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from nodescaler.config import EvaluateSettings
from nodescaler.domain.policy import PrometheusMetric, PrometheusSource
from nodescaler.domain.policy.document import token_origins
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.domain.token_origins import origin, unbound_token
from nodescaler.errors import PolicyError, SettingsError

from tests.builders import policy


def prometheus(server: str, secret: str | None = "prom/token", name: str = "m") -> dict[str, Any]:
    source = {"query": "sum(up)", "serverAddress": server}
    return {
        "type": "Prometheus",
        "name": name,
        "prometheus": source | ({"bearerTokenSecret": secret} if secret else {}),
        "target": {"type": "Value", "value": 10},
    }


def source(server: str, secret: str | None = "prom/token") -> PrometheusSource:
    built = policy(prometheus(server, secret)).spec.metrics[0]
    assert isinstance(built, PrometheusMetric)
    return built.prometheus


# Given a deployed server and one a stored policy names: Then whether they are one origin.
@pytest.mark.parametrize(
    ("deployed", "named", "same"),
    [
        ("https://Prom:443/x", "https://prom/y", True),  # case, default port, path
        ("https://prom", "HTTPS://PROM:443/", True),
        ("http://127.0.0.1:9090", "http://127.0.0.1:9090/prometheus", True),
        ("https://[::1]:9443", "https://[0:0:0:0:0:0:0:1]:9443", False),  # written otherwise
        ("https://prom", "https://prom.evil", False),
        ("https://prom", "https://evil.prom", False),
        ("https://prom", "http://prom", False),  # scheme downgrade
        ("https://prom", "https://prom:8443", False),
        ("https://prom:443", "https://prom:80", False),
    ],
)
def test_origins_are_compared_by_scheme_host_and_port(
    deployed: str, named: str, same: bool
) -> None:
    assert (origin(deployed) == origin(named)) is same


@pytest.mark.parametrize(
    ("address", "written"),
    [
        ("https://Prom:443/x", "https://prom:443"),
        ("https://prom/y", "https://prom:443"),
        ("http://Prom.Monitoring", "http://prom.monitoring:80"),
        ("http://127.0.0.1:8080/api", "http://127.0.0.1:8080"),
        ("https://[::1]:9090", "https://[::1]:9090"),
    ],
)
def test_an_origin_is_written_lowercase_with_its_port(address: str, written: str) -> None:
    assert origin(address) == written


@pytest.mark.parametrize(
    "address",
    [
        "https://prom@evil",  # userinfo: which side is the host depends on the parser
        "https://evil\\@prom",
        "https://ev%69l",  # an escape urllib would undo
        "ftp://prom",
        "https://prom:99999",
    ],
)
def test_an_address_without_a_plain_host_has_no_origin(address: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(address))):
        origin(address)


def test_given_a_token_for_a_host_urllib_would_unescape_then_the_policy_is_refused() -> None:
    document = yaml.safe_dump(
        {
            "metadata": {"name": "p"},
            "spec": {
                "minReplicas": 0,
                "maxReplicas": 10,
                "metrics": [prometheus("https://ev%69l")],
            },
        }
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(document, "p.yaml")
    assert refused.value.problems == (
        "p.yaml: spec.metrics[0].prometheus: 'https://ev%69l' is not an http(s) URL with a "
        "plain host name or address",
    )


def test_the_deployed_policies_pair_each_secret_with_its_origins_and_nothing_else() -> None:
    deployed = [
        policy(prometheus("https://Prom/x", name="a"), prometheus("https://prom:8443", name="b")),
        policy(prometheus("https://thanos", secret=None), name="open"),
    ]
    assert token_origins(deployed) == {
        ("prom/token", "https://prom:443"),
        ("prom/token", "https://prom:8443"),
    }


def test_given_the_deployed_pairing_then_nothing_is_refused() -> None:
    allowed = frozenset({("prom/token", "https://prom:443")})
    assert unbound_token(source("https://PROM/api"), allowed) is None
    assert unbound_token(source("https://evil", secret=None), allowed) is None  # no token sent


def test_given_a_deployed_secret_named_with_another_origin_then_the_refusal_names_both() -> None:
    allowed = frozenset({("prom/token", "https://prom:443")})
    assert unbound_token(source("http://127.0.0.1:9999"), allowed) == (
        "bearer token secret prom/token is deployed for https://prom:443, not for "
        "http://127.0.0.1:9999: refused, the token is neither read nor sent"
    )
    assert unbound_token(source("https://prom", secret="other"), allowed) == (
        "bearer token secret other is deployed for no server, not for https://prom:443: "
        "refused, the token is neither read nor sent"
    )


def test_the_evaluate_setting_takes_only_normalised_origins() -> None:
    variable = EvaluateSettings.model_fields["token_origins"].alias
    base = {"STATE_TABLE_NAME": "state"}
    pairs = '[["prom/token", "https://prom:443"]]'
    read = EvaluateSettings.from_environment(base | {str(variable): pairs})
    assert read.token_origin_pairs == {("prom/token", "https://prom:443")}
    with pytest.raises(SettingsError, match=r"PROMETHEUS_TOKEN_ORIGINS\[0\]\[1\]"):
        EvaluateSettings.from_environment(base | {str(variable): '[["s", "https://Prom"]]'})


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


def test_a_token_deployed_for_two_other_servers_names_both() -> None:
    allowed = frozenset({("prom/token", "https://a:443"), ("prom/token", "https://b:443")})
    assert unbound_token(source("https://evil"), allowed) == (
        "bearer token secret prom/token is deployed for https://a:443 and https://b:443, not "
        "for https://evil:443: refused, the token is neither read nor sent"
    )
