"""A metadata follower across a broken connection: to another log, or to the same one.

The embedded broker restarts empty and the daemon re-seeds it, each key's latest record
at new offsets, then writes on. A follower that read on at its old position would skip
everything below it: here that is every record of the new log it would need."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafkacoord.client.follower import MetadataFollower
from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import NodeKey, NodeValue
from kafkacoord.coordinator.runtime.shard import Record
from kafkacoord.storage.broker import EmbeddedBroker, free_port, port_is_free, tansu_binary
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics

from .cluster import wait_until

pytestmark = pytest.mark.integration

TOPICS = InternalTopics(prefix="__kc_", offsets_partitions=1)


class Tail:
    """What a follower handed over, as (incarnation, node id) in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, record: Record, offset: int) -> None:
        assert isinstance(record.value, NodeValue)
        with self._lock:
            self.seen.append((record.value.incarnation, record.value.node_id))

    def since(self, start: int) -> list[tuple[str, int]]:
        with self._lock:
            return self.seen[start:]


def _write(bootstrap: str, incarnation: str, nodes: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for node in nodes:
        value = NodeValue(node, incarnation, 1, False, 1, 1)
        producer.produce(TOPICS.metadata, encode_value(value), encode_key(NodeKey(node)))
    assert producer.flush(30) == 0


def _broker(port: int, log_dir: Path) -> EmbeddedBroker:
    broker = EmbeddedBroker(port=port, log_path=log_dir / f"tansu-{port}.log").start()
    ensure_topics(admin_client(broker.bootstrap), TOPICS.specs(), replication_factor=1)
    return broker


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def first(port: int, tmp_path: Path) -> Iterator[EmbeddedBroker]:
    broker = _broker(port, tmp_path)
    yield broker
    broker.stop()


@pytest.mark.parametrize("new_log", [24, 4], ids=["longer", "shorter"])
def test_a_follower_reads_a_replaced_log_from_its_start(
    first: EmbeddedBroker, port: int, tmp_path: Path, new_log: int
) -> None:
    _write(first.bootstrap, "old", range(10))
    tail = Tail()
    follower = MetadataFollower(first.bootstrap, TOPICS.metadata, tail, client_id="test-tail")
    second: EmbeddedBroker | None = None
    try:
        wait_until(lambda: len(tail.since(0)) == 10 or None, what="the first log read")
        assert follower.replaced == 0
        first.stop()
        second = _broker(port, tmp_path)
        # Re-seeded below the old position (or ending short of it), then written on.
        _write(second.bootstrap, "new", range(new_log))
        wait_until(lambda: ("new", new_log - 1) in tail.since(10) or None,
                   timeout_s=60, what="the new log's last record")  # fmt: skip
        _write(second.bootstrap, "later", range(3))
        wait_until(lambda: ("later", 2) in tail.since(10) or None, what="a later record")
        # Every record of the new log, in its order, and none twice.
        assert tail.since(10) == [("new", n) for n in range(new_log)] + [
            ("later", n) for n in range(3)
        ]
        assert follower.replaced == 1
        assert follower.position == new_log + 3
    finally:
        follower.close()
        if second is not None:
            second.stop()


class Cuttable:
    """A TCP proxy to a broker whose connections can all be cut at once."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.cutting = False
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cutting:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.cutting = True
        with self._lock:
            for end in self._open:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def close(self) -> None:
        self.cut()
        self.server.close()


def test_a_follower_whose_connection_broke_reads_on_where_it_was(tmp_path: Path) -> None:
    """The same log after the break: read on from the position, nothing handed twice."""
    port = free_port()
    proxy = Cuttable(port)
    url = f"tcp://127.0.0.1:{port}"
    broker = subprocess.Popen(
        [tansu_binary(), "broker", "--listener-url", url,
         "--advertised-listener-url", f"tcp://127.0.0.1:{proxy.port}",
         "--storage-engine", "memory://tansu/", "--cluster-id", "cut"],
        stdout=(tmp_path / "tansu.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    bootstrap = f"127.0.0.1:{proxy.port}"
    tail = Tail()
    follower: MetadataFollower | None = None
    try:
        wait_until(lambda: not port_is_free(port) or None, what="the broker listening")
        ensure_topics(admin_client(bootstrap), TOPICS.specs(), replication_factor=1)
        _write(bootstrap, "before", range(10))
        follower = MetadataFollower(bootstrap, TOPICS.metadata, tail, client_id="test-tail")
        wait_until(lambda: len(tail.since(0)) == 10 or None, what="the log read")
        proxy.cut()
        time.sleep(3)  # librdkafka notices, and retries against a refusing proxy
        proxy.cutting = False
        _write(bootstrap, "after", range(5))
        wait_until(lambda: ("after", 4) in tail.since(0) or None, what="the records after")
        assert tail.since(0) == [("before", n) for n in range(10)] + [
            ("after", n) for n in range(5)
        ]
        assert follower.replaced == 0
        assert follower.checks >= 1  # the break was noticed and the log checked
    finally:
        if follower is not None:
            follower.close()
        proxy.close()
        broker.kill()
        broker.wait(10)
