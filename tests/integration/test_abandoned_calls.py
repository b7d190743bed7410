"""A call the client gives up on resets its connection (Kafka's clients disconnect on a
request timeout too): nothing it sent can reach the daemon afterwards, and the other
calls on that connection are retried on a new one."""

from __future__ import annotations

import threading
import time

import pytest

from kafkacoord.client.errors import RequestError, RequestTimeoutError
from kafkacoord.coordinator.protocol import group_api as g
from tests.abandoned import SilentListener, commit, silent_client


def test_a_call_that_times_out_resets_its_connection() -> None:
    listener = SilentListener()
    client = silent_client(listener.endpoint, attempt_timeout_s=0.3)
    try:
        with pytest.raises(RequestTimeoutError):
            client.call(0, commit(1), g.OffsetCommitResponse, timeout_s=0.3)
        listener.wait_connections(1)
        deadline = time.monotonic() + 5
        while not listener.reset[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert listener.reset[0], "the daemon saw a FIN, not a reset"
        assert listener.bytes_on(0) > 0  # the request did go out before it was abandoned
    finally:
        client.close()
        listener.close()


def test_the_other_calls_on_a_reset_connection_are_sent_again_on_a_new_one() -> None:
    listener = SilentListener()
    client = silent_client(listener.endpoint, attempt_timeout_s=0.3)
    errors: list[RequestError] = []

    def patient() -> None:
        try:
            client.call(0, commit(2), g.OffsetCommitResponse, timeout_s=1.5,
                        attempt_timeout_s=5.0)  # fmt: skip
        except RequestError as exc:
            errors.append(exc)

    try:
        waiting = threading.Thread(target=patient)
        waiting.start()
        listener.wait_connections(1)
        time.sleep(0.1)  # the patient call is in flight on the first connection
        with pytest.raises(RequestTimeoutError):
            client.call(0, commit(1), g.OffsetCommitResponse, timeout_s=0.3)
        # The patient call lost its connection to the reset and went out on a second one.
        listener.wait_connections(2)
        deadline = time.monotonic() + 5
        while listener.bytes_on(1) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert listener.bytes_on(1) > 0
        waiting.join(5)
        assert len(errors) == 1 and isinstance(errors[0], RequestTimeoutError), errors
    finally:
        client.close()
        listener.close()
