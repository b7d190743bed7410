"""Poison records in both internal topics of running daemons, then a strict daemon.

Three kinds of poison go into ``<prefix>metadata`` and ``<prefix>offsets`` with a
plain producer, once before the daemons start (their loads read them) and once
while they run (the node agents' metadata followers and the warm tailing of
followed group shards read them). The daemons must keep serving, name every
poisoned offset in their logs and keep the good records around the poison; a
daemon started in strict mode must exit non-zero naming the first poison record.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from kafkacoord.client import GroupAdmin
from kafkacoord.client.admin import ControllerAdmin
from kafkacoord.codecs import encode_key, encode_value
from kafkacoord.codecs.models import NodeKey, NodeValue, OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.groups.partitioning import partition_for
from kafkacoord.storage.clients import admin_client
from kafkacoord.storage.topics import InternalTopics, ensure_topics
from tests.integration.cluster import DaemonProcess, fast_daemon_env, start_daemon, wait_until

from .broker import BrokerControl
from .harness import report

SHARDS = 2
DAEMONS = (200, 201)
KINDS = ("truncated", "unknown type", "wrong version", "foreign type")
KEPT_GROUP = "kept"


@dataclass
class PoisonFigures:
    injected: dict[str, list[int]] = field(default_factory=dict)
    """Poisoned offsets per ``topic-partition``."""
    logged: dict[str, set[int]] = field(default_factory=dict)
    """Offsets the daemons' skip log lines name, per ``topic-partition``."""
    skipped: int = 0
    """Skip log lines over all daemons (a record read by several readers counts per read)."""
    ready_poison_skipped: int = 0
    """``poison_skipped`` of the first daemon's ready line (its loads)."""
    kept_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """Committed offsets of the group written around the poison, fetched through kafkacoord."""
    round_trip: dict[tuple[str, int], int] = field(default_factory=dict)
    """A commit made through kafkacoord after the poison, fetched back."""
    created_topic_id: str = ""
    strict_exit_code: int = 0
    strict_output: str = ""
    first_poison: str = ""
    """``topic-partition@offset`` of the first poison record a fresh load meets."""


@dataclass(frozen=True)
class PoisonSummary:
    poison_records_injected: int
    poison_records_skipped: int
    strict_exit_code: int


def _node_value(node_id: int) -> bytes:
    return encode_value(NodeValue(node_id, "poison", 1, False, 1, controller_epoch=0))


def _commit_value(offset: int) -> bytes:
    return encode_value(OffsetCommitValue(offset, "", 1))


def poison_records(topic_kind: str, tag: str) -> list[tuple[bytes, bytes]]:
    """One record of each poison kind for a metadata or offsets topic; keys unique per tag."""
    node = (encode_key(NodeKey(9000 + zlib.crc32(tag.encode()) % 1000)), _node_value(9000))
    commit = (encode_key(OffsetCommitKey(f"poison-{tag}", "t", 0)), _commit_value(1))
    (key, value), foreign = (node, commit) if topic_kind == "metadata" else (commit, node)
    return [
        (key, value[:-3]),  # truncated Avro body
        (bytes((0x63, 1)) + b"\x02x", b"\x00\x01\x02"),  # record type tag 99 is unknown
        (key, b"\x00\x63" + value[2:]),  # schema version 99 is unknown
        foreign,  # well formed, but a record type of the other topic
    ]


class _Injector:
    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

    def write(self, topic: str, partition: int, records: list[tuple[bytes, bytes]]) -> list[int]:
        offsets: list[int] = []
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets.append(msg.offset())

        for key, value in records:
            self._producer.produce(topic, value, key, partition, on_delivery=delivered)
            # One at a time keeps the offsets in the order given.
            self._producer.flush(30)
        if errors or len(offsets) != len(records):
            raise RuntimeError(f"injecting into {topic}-{partition} failed: {errors}")
        return offsets


def _skips(daemons: list[DaemonProcess]) -> list[dict[str, object]]:
    return [e for d in daemons for e in list(d.events) if e.get("event") == "skipped poison record"]


def _logged(daemons: list[DaemonProcess]) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for event in _skips(daemons):
        found.setdefault(f"{event['topic']}-{event['partition']}", set()).add(int(event["offset"]))  # type: ignore[call-overload]
    return found


def _covers(logged: dict[str, set[int]], injected: dict[str, list[int]]) -> bool:
    return all(set(offsets) <= logged.get(tp, set()) for tp, offsets in injected.items())


def run_poison_scenario(broker: BrokerControl, root: Path) -> PoisonFigures:
    bootstrap = broker.bootstrap
    prefix = f"p{uuid.uuid4().hex[:8]}_"
    topics = InternalTopics(prefix=prefix, offsets_partitions=SHARDS)
    ensure_topics(admin_client(bootstrap), topics.specs(), replication_factor=1)
    figures = PoisonFigures()
    injector = _Injector(bootstrap)

    def inject(round_: str) -> None:
        tp = f"{topics.metadata}-0"
        offsets = injector.write(topics.metadata, 0, poison_records("metadata", round_))
        figures.injected.setdefault(tp, []).extend(offsets)
        for shard in range(SHARDS):
            records = poison_records("offsets", f"{round_}{shard}")
            offsets = injector.write(topics.offsets, shard, records)
            figures.injected.setdefault(f"{topics.offsets}-{shard}", []).extend(offsets)

    # Good records on both sides of the poison: skipping must not lose them.
    kept_shard = partition_for(KEPT_GROUP, SHARDS)
    before = (encode_key(OffsetCommitKey(KEPT_GROUP, "t", 0)), _commit_value(10))
    after = (encode_key(OffsetCommitKey(KEPT_GROUP, "t", 1)), _commit_value(11))
    injector.write(topics.offsets, kept_shard, [before])
    inject("a")
    injector.write(topics.offsets, kept_shard, [after])
    figures.first_poison = f"{topics.metadata}-0@{figures.injected[f'{topics.metadata}-0'][0]}"

    env = {**fast_daemon_env(bootstrap, prefix, SHARDS), "KAFKACOORD_METRICS_PORT": "0"}
    daemons = [start_daemon(env, root, node) for node in DAEMONS]
    admin = ControllerAdmin(bootstrap, topics, timeout_s=60)
    groups = GroupAdmin(bootstrap, topic_prefix=prefix, offsets_partitions=SHARDS, timeout_s=60)
    try:
        ready = daemons[0].wait_for("daemon ready")
        figures.ready_poison_skipped = int(ready["poison_skipped"])
        for daemon in daemons:
            daemon.wait_for("node registered")
        # Both daemons replicate every shard, so one of them tails what the other leads.
        wait_until(lambda: _followed_everywhere(admin, topics), timeout_s=90,
                   what="every group shard on both daemons")  # fmt: skip
        inject("b")
        wait_until(lambda: _covers(_logged(daemons), figures.injected), timeout_s=60,
                   what="every poisoned offset logged")  # fmt: skip

        figures.kept_offsets = {tp: p.offset for tp, p in groups.committed(KEPT_GROUP).items()}
        group = "after-poison"
        groups.reset_offsets(group, {("t", 0): 42, ("t", 3): 7})
        figures.round_trip = {tp: p.offset for tp, p in groups.committed(group).items()}
        created = admin.create_topic("orders", replica_assignment={0: [DAEMONS[0]]})
        figures.created_topic_id = created.topic_id
        figures.logged = _logged(daemons)
        figures.skipped = len(_skips(daemons))
    finally:
        groups.close()
        admin.close()
        for daemon in daemons:
            daemon.stop()

    strict = subprocess.run(
        [sys.executable, "-m", "kafkacoord", "daemon"],
        env={**os.environ, **env, "KAFKACOORD_STRICT_RECORDS": "true",
             "KAFKACOORD_NODE_ID": "299", "KAFKACOORD_DATA_DIR": str(root / "strict")},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    figures.strict_exit_code = strict.returncode
    figures.strict_output = strict.stderr
    injected = sum(len(offsets) for offsets in figures.injected.values())
    summary = PoisonSummary(injected, figures.skipped, figures.strict_exit_code)
    report("poison", broker, summary)
    return figures


def _followed_everywhere(admin: ControllerAdmin, topics: InternalTopics) -> bool:
    image = admin.metadata()
    for shard in range(SHARDS):
        state = image.partition(topics.offsets, shard)
        if state is None or state.leader < 0 or sorted(state.isr) != sorted(DAEMONS):
            return False
    return True


def check_poison_outcome(figures: PoisonFigures) -> None:
    """The exact outcome, checked the same way on every broker."""

    # Two rounds (before start, while running) of every kind into every partition.
    assert len(figures.injected) == 1 + SHARDS
    assert all(len(offsets) == 2 * len(KINDS) for offsets in figures.injected.values())
    # The skip lines name exactly the injected offsets, and nothing else.
    assert figures.logged == {tp: set(offsets) for tp, offsets in figures.injected.items()}
    injected = sum(len(offsets) for offsets in figures.injected.values())
    assert figures.skipped >= injected
    # The first daemon's own loads met the first round in both topics.
    assert figures.ready_poison_skipped >= (1 + SHARDS) * len(KINDS)

    # Still serving: the good records around the poison survived, and new requests work.
    assert figures.kept_offsets == {("t", 0): 10, ("t", 1): 11}
    assert figures.round_trip == {("t", 0): 42, ("t", 3): 7}
    assert figures.created_topic_id

    assert figures.strict_exit_code != 0
    assert f"poison record at {figures.first_poison}" in figures.strict_output
    assert "Traceback" not in figures.strict_output
