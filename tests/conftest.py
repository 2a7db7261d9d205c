"""Test-wide settings: Hypothesis explores freely on a laptop and replays a fixed search in CI."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
