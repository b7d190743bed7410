"""End-to-end fixtures: Kafka-compatible brokers in Docker containers (testcontainers).

Without a Docker daemon every test here skips, naming the reason; with
``KAFKACOORD_E2E_REQUIRED=1`` (set by CI) it fails instead, so a broken Docker set-up
cannot pass as a green run. Every test runs on tansu and on Apache Kafka;
``$KAFKACOORD_E2E_BROKER`` (``tansu`` or ``apache-kafka``) narrows the run to one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .containers import BrokerChoice, ContainerBroker, docker_problem, remove_leftovers

REQUIRED_ENV = "KAFKACOORD_E2E_REQUIRED"
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items: mark only the ones in this directory.
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session", autouse=True)
def _docker() -> None:
    """Skip (or, when required, fail) every end-to-end test while Docker is unusable."""
    problem = docker_problem()
    if problem is None:
        removed = remove_leftovers()
        if removed:
            print(f"removed broker containers of earlier runs: {removed}")
        return
    reason = f"Docker is not available: {problem}"
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRED_ENV}=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session", params=BrokerChoice.kinds())
def _broker_choice(request: pytest.FixtureRequest) -> BrokerChoice:
    return BrokerChoice(str(request.param))


@pytest.fixture(scope="session")
def container_broker(_broker_choice: BrokerChoice) -> Iterator[ContainerBroker]:
    """One broker container shared by the whole session; never restart it."""
    broker = _broker_choice.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def restartable_broker(_broker_choice: BrokerChoice) -> Iterator[ContainerBroker]:
    """A private broker container that the test may restart."""
    broker = _broker_choice.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def e2e_bootstrap(container_broker: ContainerBroker) -> str:
    return container_broker.bootstrap


@pytest.fixture(scope="session")
def bootstrap(e2e_bootstrap: str) -> str:
    """Shadows the root conftest's: helpers that ask for ``bootstrap`` get the container,
    and the embedded broker never starts for end-to-end tests."""
    return e2e_bootstrap
