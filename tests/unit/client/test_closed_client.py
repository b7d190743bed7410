"""A closed client stops retrying: a call still waiting for a route gives up at once,
so a stopping process (a daemon's console, its own node agent) is not held up."""

from __future__ import annotations

import threading
import time

import pytest

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.errors import RequestError
from kafkacoord.client.routes import CONTROLLER, StaticRoutes
from kafkacoord.coordinator.protocol import Empty, ErrorCode
from kafkacoord.coordinator.protocol import controller_api as c


def test_a_call_waiting_for_a_route_gives_up_once_its_client_is_closed() -> None:
    # No route to the controller is known, so the call waits and retries until its timeout.
    client = CoordinatorClient("127.0.0.1:1", routes=StaticRoutes())
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client.call(CONTROLLER, c.FenceNode(node_id=1), Empty, timeout_s=60)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.5)
    assert caller.is_alive()  # still retrying
    closed = time.monotonic()
    client.close()
    caller.join(10)
    assert not caller.is_alive()
    assert time.monotonic() - closed < 2.0  # one backoff at most, not the 60 s timeout
    [error] = outcome
    assert isinstance(error, RequestError) and error.code is ErrorCode.REQUEST_TIMED_OUT
    assert "closed" in (error.message or "")


def test_a_closed_client_refuses_new_calls() -> None:
    client = CoordinatorClient("127.0.0.1:1", routes=StaticRoutes())
    client.close()
    with pytest.raises(RequestError, match="closed"):
        client.call(CONTROLLER, c.FenceNode(node_id=1), Empty, timeout_s=5)
