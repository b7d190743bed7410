"""Cluster driving shared by the failure scenarios.

A :class:`FailureCluster` runs kafkacoord daemons as processes (and, when a scenario
needs service nodes, node agents in this process) under a topic prefix of its own, so
scenarios can share one broker. It builds on ``tests/integration/cluster.py``.
Requests reach a daemon over its listener: through the kafkacoord clients, or as raw
frames (:func:`call_raw`) to the endpoint the daemon logs as it starts listening.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import ControllerAdmin, read_metadata
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.base import GroupChannel
from kafkacoord.client.connector import error_of
from kafkacoord.client.routes import LISTENER_ENDPOINT
from kafkacoord.codecs import CodecError, decode_record
from kafkacoord.codecs.models import ControllerValue, PartitionValue
from kafkacoord.coordinator.controller.image import MetadataImage
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.coordinator.protocol import ALL_APIS, ErrorCode
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from kafkacoord.wire.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameReader,
    RequestHeader,
    ResponseFrame,
    decode_response,
    encode_request,
)
from tests.integration.cluster import (
    DaemonProcess,
    Replicas,
    fast_daemon_env,
    start_daemon,
    wait_until,
)
from tests.rawwire import closed_by_peer, connect, read_response

from .broker import BrokerControl

__all__ = [
    "FIGURES_ENV",
    "FailureCluster",
    "RawExchange",
    "RawReply",
    "SlowReplicas",
    "call_raw",
    "groups_on_shard",
    "read_log",
    "report",
    "send_garbage",
    "stale_epoch_records",
    "wait_until",
]

FIGURES_ENV = "KAFKACOORD_FAILURE_FIGURES"

# The embedded broker's log is the only broker log a scenario can point at.
_FENCED_EVENT = "shard writer fenced; stepping down"


def report(scenario: str, broker: BrokerControl, figures: Any) -> dict[str, Any]:
    """Print a scenario's figures as one JSON line, and append it to $KAFKACOORD_FAILURE_FIGURES."""
    line = {"scenario": scenario, "broker": broker.kind, **asdict(figures)}
    text = json.dumps(line, sort_keys=True)
    print(text, file=sys.stdout, flush=True)
    path = os.environ.get(FIGURES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text + "\n")
    return line


def groups_on_shard(stem: str, shard: int, partitions: int, count: int = 1) -> list[str]:
    """``count`` group ids starting with ``stem`` that map to ``shard`` (bounded search)."""
    found = [
        f"{stem}{i}" for i in range(10_000) if partition_for(f"{stem}{i}", partitions) == shard
    ]
    if len(found) < count:
        raise AssertionError(f"fewer than {count} groups of stem {stem!r} map to shard {shard}")
    return found[:count]


class SlowReplicas(Replicas):
    """Followers report caught up only after a delay, so a reassignment stays mid-flight."""

    def __init__(self, catch_up_delay_s: float) -> None:
        super().__init__()
        self._delay_s = catch_up_delay_s

    def _caught_up(self, topic: str, partition: int) -> None:
        time.sleep(self._delay_s)
        super()._caught_up(topic, partition)


@dataclass
class FailureCluster:
    """Daemons (processes) and service nodes (in-process agents) under a private prefix."""

    broker: BrokerControl
    root: Path
    offsets_partitions: int = 3
    extra_env: Mapping[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"f{uuid.uuid4().hex[:10]}_")

    def __post_init__(self) -> None:
        self.bootstrap = self.broker.bootstrap
        self.topics = InternalTopics(prefix=self.prefix, offsets_partitions=self.offsets_partitions)
        ensure_topics(admin_client(self.bootstrap), self.topics.specs(), replication_factor=1)
        self.env = {
            **fast_daemon_env(self.bootstrap, self.prefix, self.offsets_partitions),
            # Leaderships move only because of the failures a scenario injects.
            "KAFKACOORD_AUTO_LEADER_REBALANCE_ENABLE": "false",
            "KAFKACOORD_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",
            **self.extra_env,
        }
        self.daemons: dict[int, DaemonProcess] = {}
        # Every incarnation of every daemon, so a killed one's log stays readable.
        self.history: dict[int, list[DaemonProcess]] = {}
        self.paused: set[int] = set()
        self.agents: dict[int, NodeAgent] = {}
        self.replicas: dict[int, Replicas] = {}
        self._admin: ControllerAdmin | None = None
        self._clients: list[GroupChannel | GroupAdmin] = []

    # -- daemons -------------------------------------------------------------------------

    def start_daemon(self, node: int) -> DaemonProcess:
        daemon = start_daemon(self.env, self.root, node)
        self.daemons[node] = daemon
        self.history.setdefault(node, []).append(daemon)
        return daemon

    def kill(self, node: int) -> None:
        """kill -9."""
        self.paused.discard(node)
        self.daemons[node].kill()

    def restart(self, node: int) -> DaemonProcess:
        """The same node id and data dir, after a kill."""
        assert self.daemons[node].process.poll() is not None, f"daemon {node} is still running"
        return self.start_daemon(node)

    def pause(self, node: int) -> None:
        """SIGSTOP: the process keeps its sessions' state but runs nothing (a zombie-to-be)."""
        os.kill(self.daemons[node].process.pid, signal.SIGSTOP)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        os.kill(self.daemons[node].process.pid, signal.SIGCONT)
        self.paused.discard(node)

    def events(self, node: int, event: str) -> list[dict[str, Any]]:
        """Every log entry named ``event`` of every incarnation of daemon ``node``."""
        return [e for d in self.history.get(node, []) for e in list(d.events)
                if e.get("event") == event]  # fmt: skip

    def fenced_writers(self, node: int, shard: str | None = None) -> list[dict[str, Any]]:
        return [
            e for e in self.events(node, _FENCED_EVENT) if shard is None or e.get("shard") == shard
        ]

    def log_tail(self, node: int, entries: int = 40) -> str:
        """The last log entries of daemon ``node``, for failure messages."""
        noise = {"event", "timestamp", "level", "logger"}
        lines = []
        for entry in list(self.daemons[node].events)[-entries:]:
            fields = {k: v for k, v in entry.items() if k not in noise}
            lines.append(f"{entry.get('event')} {fields}")
        return "\n".join(lines)

    def endpoint(self, node: int, timeout_s: float = 60) -> str:
        """Where the current incarnation of daemon ``node`` listens (from its log)."""
        return str(self.daemons[node].wait_for("listening", timeout_s=timeout_s)["advertised"])

    def alive(self, node: int) -> bool:
        return self.daemons[node].process.poll() is None

    # -- service nodes ---------------------------------------------------------------------

    def start_node(
        self, node: int, replicas: Replicas | None = None, *, rack: str | None = None
    ) -> NodeAgent:
        replicas = replicas or Replicas()
        agent = NodeAgent(self.bootstrap, node_id=node, handler=replicas, rack=rack,
                          topic_prefix=self.prefix, heartbeat_interval_ms=500)  # fmt: skip
        replicas.agent = agent
        self.replicas[node] = replicas
        self.agents[node] = agent.start(timeout_s=60)
        return agent

    # -- reading the state -------------------------------------------------------------------

    def image(self) -> MetadataImage:
        return read_metadata(self.bootstrap, self.topics.metadata)

    def active_controller(self) -> ControllerValue | None:
        return self.image().controller

    def shard_state(self, shard: int) -> PartitionValue | None:
        return self.image().partition(self.topics.offsets, shard)

    def node_endpoint(self, node: int) -> str | None:
        """The listener a node's registration advertises, if it is registered."""
        value = self.image().node(node)
        return None if value is None else value.endpoints.get(LISTENER_ENDPOINT)

    def shard_leader(self, shard: int) -> int | None:
        value = self.shard_state(shard)
        return None if value is None or value.leader < 0 else value.leader

    def wait_ready(self, daemons: Iterable[int], *, timeout_s: float = 90) -> MetadataImage:
        """Every daemon registered and unfenced, a controller elected, every shard led."""
        wanted = set(daemons)

        def ready() -> MetadataImage | None:
            image = self.image()
            shards = [
                image.partition(self.topics.offsets, s) for s in range(self.offsets_partitions)
            ]
            ok = (
                image.controller is not None
                and wanted <= image.live_nodes()
                and all(v is not None and v.leader in wanted for v in shards)
            )
            return image if ok else None

        return wait_until(ready, timeout_s=timeout_s, what="daemons registered and shards placed")

    def controller_epochs(self) -> list[int]:
        """The epochs of the controller records of the metadata log, in log order."""
        epochs: list[int] = []
        for _, key, value in read_log(self.bootstrap, self.topics.metadata, 0):
            try:
                _, decoded = decode_record(key, value)
            except CodecError:
                continue
            if isinstance(decoded, ControllerValue):
                epochs.append(decoded.epoch)
        return epochs

    # -- clients -------------------------------------------------------------------------------

    @property
    def admin(self) -> ControllerAdmin:
        if self._admin is None:
            self._admin = ControllerAdmin(self.bootstrap, self.topics, timeout_s=60)
        return self._admin

    def group_channel(self, timeout_s: float = 30.0) -> GroupChannel:
        channel = GroupChannel(
            self.bootstrap, topic_prefix=self.prefix,
            offsets_partitions=self.offsets_partitions, timeout_s=timeout_s,
        )  # fmt: skip
        self._clients.append(channel)
        return channel

    def group_admin(self, timeout_s: float = 60.0) -> GroupAdmin:
        admin = GroupAdmin(
            self.bootstrap, topic_prefix=self.prefix,
            offsets_partitions=self.offsets_partitions, timeout_s=timeout_s,
        )  # fmt: skip
        self._clients.append(admin)
        return admin

    # -- teardown ------------------------------------------------------------------------------

    def close(self) -> None:
        for node in list(self.paused):
            with contextlib.suppress(ProcessLookupError):
                self.resume(node)
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        if self._admin is not None:
            self._admin.close()
        for agent in self.agents.values():
            with contextlib.suppress(Exception):
                agent.close()
        # Stop the daemons in parallel: each may take a few seconds to leave its groups.
        stoppers = [threading.Thread(target=d.stop) for d in self.daemons.values()]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(60)

    def __enter__(self) -> FailureCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _messages(
    bootstrap: str, topic: str, partition: int, *, committed: bool, timeout_s: float
) -> list[Message]:
    """Every message of a partition from offset 0 to its end, in order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"failure-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[Message] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is None:
                messages.append(msg)
            elif error.code() == KafkaError._PARTITION_EOF:
                return messages
            else:
                raise AssertionError(error.str())
        raise AssertionError(f"could not read {topic}-{partition} to its end in {timeout_s}s")
    finally:
        consumer.close()


def read_log(
    bootstrap: str, topic: str, partition: int, *, committed: bool = True, timeout_s: float = 30
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of a partition from offset 0, in order (``read_committed`` by default)."""
    messages = _messages(bootstrap, topic, partition, committed=committed, timeout_s=timeout_s)
    return [(cast(int, m.offset()), m.key(), m.value()) for m in messages]


def stale_epoch_records(bootstrap: str, topic: str, partition: int, timeout_s: float = 30) -> int:
    """Records of a group shard's log that readers ignore: tagged with a leader epoch below
    one announced earlier in the log (a zombie leader's appends). Zero where the shards
    are fenced by transactions instead, which keep such records out of the log."""
    try:
        from kafkacoord.storage.fencing import LeaderEpochFence
    except ImportError:
        return 0
    fence = LeaderEpochFence()
    messages = _messages(bootstrap, topic, partition, committed=True, timeout_s=timeout_s)
    return sum(not fence.admit(m.key(), m.value(), cast(Any, m.headers())) for m in messages)


@dataclass(frozen=True)
class RawReply:
    """A daemon's answer to one raw frame, and what became of the connection."""

    correlation_id: int
    error: ErrorCode
    message: str | None
    body: bytes
    closed: bool
    """The daemon closed the connection after answering."""


def call_raw(
    endpoint: str,
    *,
    api: str | int,
    body: bytes,
    shard: int = 0,
    version: int = 0,
    correlation_id: int = 1,
    timeout_s: float = 30,
) -> RawReply:
    """Send one well-framed request around an arbitrary body straight to a daemon's
    listener, below every kafkacoord client; ``api`` is a name or a raw api key."""
    key = ALL_APIS[api].key if isinstance(api, str) else api
    header = RequestHeader(key, version, correlation_id, shard, f"raw-{uuid.uuid4().hex[:12]}")
    with connect(endpoint, timeout_s) as sock:
        sock.sendall(encode_request(header, body))
        frame = read_response(sock)
        closed = closed_by_peer(sock, timeout_s)
    return RawReply(frame.correlation_id, error_of(frame), frame.message, frame.body, closed)


@dataclass(frozen=True)
class RawExchange:
    """What a daemon made of bytes sent on a connection of their own."""

    peer: str
    """This end's address, as the daemon's log names the connection (``peer``)."""
    replies: list[ResponseFrame]
    closed: bool
    """The daemon closed the connection (read EOF or a reset) within the timeout."""


def send_garbage(
    endpoint: str, data: bytes, *, half_close: bool = False, timeout_s: float = 10
) -> RawExchange:
    """Write ``data`` on a new connection (then maybe shut down writing, as a client that
    dies mid-frame does) and read whatever comes back until the daemon closes it."""
    with connect(endpoint, timeout_s) as sock:
        host, port = sock.getsockname()[:2]
        received = bytearray()
        closed = False
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        sock.settimeout(0.2)
        deadline = time.monotonic() + timeout_s
        while not closed and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
            received += chunk
    reader = FrameReader(DEFAULT_MAX_FRAME_BYTES)
    replies = [decode_response(frame) for frame in reader.feed(bytes(received))]
    assert reader.pending == 0, f"a reply of {endpoint} was cut short: {bytes(received)!r}"
    return RawExchange(f"{host}:{port}", replies, closed)
