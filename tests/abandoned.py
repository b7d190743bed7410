"""A listener that records what reaches it and answers nothing: where a client's abandoned
calls would show up if they were still delivered."""

from __future__ import annotations

import socket
import threading
import time

from kafkacoord.client.connector import CoordinatorClient
from kafkacoord.client.routes import StaticRoutes
from kafkacoord.coordinator.protocol import group_api as g


class SilentListener:
    """Accepts connections and keeps every byte each one sends; never replies."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._server = socket.create_server((host, 0))
        self.endpoint = f"{host}:{self._server.getsockname()[1]}"
        self.peers: list[socket.socket] = []
        self.received: list[bytearray] = []
        self.reset: list[bool] = []  # per connection: did the client reset it
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                peer, _ = self._server.accept()
            except OSError:
                return
            data = bytearray()
            with self._lock:
                self.peers.append(peer)
                self.received.append(data)
                self.reset.append(False)
                index = len(self.peers) - 1
            threading.Thread(target=self._read, args=(peer, data, index), daemon=True).start()

    def _read(self, peer: socket.socket, data: bytearray, index: int) -> None:
        while True:
            try:
                chunk = peer.recv(65536)
            except ConnectionResetError:
                self.reset[index] = True
                return
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                data.extend(chunk)

    def wait_connections(self, count: int, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.peers) < count:
            assert time.monotonic() < deadline, f"{len(self.peers)} of {count} connections"
            time.sleep(0.01)

    def bytes_on(self, index: int) -> int:
        with self._lock:
            return len(self.received[index])

    def close(self) -> None:
        self._server.close()
        for peer in self.peers:
            peer.close()


def silent_client(endpoint: str, **kwargs: float) -> CoordinatorClient:
    return CoordinatorClient("unused:9092", routes=StaticRoutes(default=endpoint), **kwargs)


def commit(value: int) -> g.OffsetCommit:
    return g.OffsetCommit(
        group_id="g",
        topics=[
            g.CommitTopic(name="orders", partitions=[g.CommitPartition(partition=0, offset=value)])
        ],
    )
