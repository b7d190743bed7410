"""A commit sent just as the network is cut, and abandoned by its client, never reaches
the daemon when the cut heals. Found by the campaign (seed 9, Apache Kafka): TCP went on
retransmitting such a commit, which landed 26 s later over a newer acknowledged one."""

from __future__ import annotations

import time

import pytest

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.errors import RequestTimeoutError
from kafkacoord.coordinator.protocol import group_api as g
from kafkacoord.wire.connection import ConnectionLostError
from tests.abandoned import SilentListener, commit, silent_client

from .netlab import NetLab

pytestmark = [pytest.mark.integration, pytest.mark.nemesis]


def _connect_before_the_cut(client: CoordinatorClient, endpoint: str) -> None:
    """The client's connect timeout is short, so that it gives up fast once cut off; a
    first connect into a namespace just made may take longer on a loaded machine."""
    deadline = time.monotonic() + 15
    while True:
        try:
            client.connection(endpoint)
            return
        except ConnectionLostError:
            if time.monotonic() > deadline:
                raise


def test_an_abandoned_commit_is_not_delivered_when_the_cut_heals() -> None:
    with NetLab() as lab:
        daemon, client_host = lab.add_host("daemon"), lab.add_host("client")
        with lab.inside(daemon):
            listener = SilentListener(daemon.address)
        with lab.inside(client_host):
            client = silent_client(listener.endpoint, attempt_timeout_s=1.0,
                                   connect_timeout_s=0.5)  # fmt: skip
            try:
                _connect_before_the_cut(client, listener.endpoint)
                listener.wait_connections(1)
                lab.cut(client_host, daemon)
                with pytest.raises(RequestTimeoutError):
                    client.call(0, commit(1), g.OffsetCommitResponse, timeout_s=1.0)
                lab.heal()
                # Unreset, TCP retransmits the commit within seconds of the heal (its
                # backoff doubles from 0.2 s).
                deadline = time.monotonic() + 8
                while listener.bytes_on(0) == 0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert listener.bytes_on(0) == 0, "the abandoned commit reached the daemon"
                # The client reset its end: the daemon's next write is refused.
                peer = listener.peers[0]
                peer.sendall(b"\0")
                deadline = time.monotonic() + 5
                while not listener.reset[0] and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert listener.reset[0]
            finally:
                client.close()
                listener.close()
