"""`make bench`'s Prometheus figure, at a tiny size: it comes out, named as results.json
names it, from a query that read the right number (the bench refuses any other)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_bench import prometheus
from nodescaler_sandbox.prometheus import PrometheusMissingError

pytestmark = pytest.mark.slow  # a real Prometheus server


def test_given_a_few_queries_then_p50_is_at_most_p99() -> None:
    try:
        figures = prometheus.run(repetitions=5)
    except PrometheusMissingError as missing:
        pytest.fail(str(missing), pytrace=False)
    assert set(figures) == {"prometheus_query_ms_p50", "prometheus_query_ms_p99"}
    assert 0 < figures["prometheus_query_ms_p50"] <= figures["prometheus_query_ms_p99"]


def test_given_no_server_installed_then_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodescaler_sandbox import prometheus as server

    monkeypatch.setenv("PROMETHEUS_BIN", "/no/such/prometheus")
    monkeypatch.setenv("PATH", "/no/such/folder")
    monkeypatch.setattr(server, "UNPACKED", server.Path("/no/such/unpacked"))
    with pytest.raises(PrometheusMissingError, match=r"run `make setup` \(apt-get download"):
        server.prometheus_binary()


def test_where_apt_cannot_fetch_it_the_bootstrap_says_why_and_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodescaler_sandbox import prometheus as server

    monkeypatch.setattr(server, "UNPACKED", tmp_path / "usr" / "bin" / "prometheus")
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, no dpkg-deb
    with pytest.raises(SystemExit) as exited:
        server.main()
    assert str(exited.value.code) == (
        f"no apt-get or dpkg-deb here to fetch {server.DEBIAN.pinned}\n{server.HOW_TO_INSTALL}"
    )
