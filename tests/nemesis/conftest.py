"""The fault campaign needs root (network namespaces, iptables): without it its tests
skip, except where ``KAFKACOORD_NEMESIS_REQUIRED=1`` (CI) makes that a failure."""

from __future__ import annotations

import os

import pytest

from .netlab import available

REQUIRED_ENV = "KAFKACOORD_NEMESIS_REQUIRED"


@pytest.fixture(autouse=True)
def _namespaces() -> None:
    missing = available()
    if missing is None:
        return
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"{missing} ({REQUIRED_ENV}=1)", pytrace=False)
    pytest.skip(missing)
