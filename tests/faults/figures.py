"""A fault run's figures, printed past pytest's capture so that they show without `-s`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest


def show(config: pytest.Config, title: str, figures: Mapping[str, object]) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    width = max(len(name) for name in figures)
    lines = [f"  {name:<{width}}  {value}" for name, value in figures.items()]
    with capture.global_and_fixture_disabled():
        print(f"\n== {title}", *lines, sep="\n")
