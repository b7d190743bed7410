"""kill -9 storm: daemons die and come back while offsets are committed without pause.

Three daemons; a few standalone consumers (no group membership: generation -1, the
way kafka-consumer-groups and simple consumers commit) commit increasing offsets in
a loop. A seeded RNG picks a daemon to kill -9, it is restarted with the same node id
and data dir, and the storm waits until the cluster serves again: the restarted
daemon registered with the controller and every committer had a commit acknowledged
since. Afterwards:

- every acknowledged commit is there with exactly its value, or with a larger value
  that was sent (an unacknowledged commit may still have been applied; a value never
  sent, or below the last acknowledged one, is lost or corrupted data);
- the controller records of the metadata log have strictly increasing epochs.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkacoord.client.base import GroupChannel
from kafkacoord.client.errors import RequestError
from kafkacoord.coordinator.protocol import ErrorCode
from kafkacoord.coordinator.protocol import group_api as g

from .broker import BrokerControl
from .harness import FailureCluster, groups_on_shard, report, wait_until

DAEMONS = (100, 101, 102)
SHARDS = 3
TOPIC = "storm-events"
PARTITIONS = 4

TP = tuple[str, int]


@dataclass
class KillStormFigures:
    kills_survived: int
    commits_acknowledged: int
    commits_checked: int
    unacknowledged_applied: int
    max_controller_epoch: int
    seconds: float


@dataclass
class _Committer:
    """Commits increasing offsets (1, 2, 3, ... over its requests) to a few partitions per
    request, one request at a time."""

    channel: GroupChannel
    group: str
    interval_s: float
    rng: random.Random
    acked: dict[TP, int] = field(default_factory=dict)
    sent: dict[TP, set[int]] = field(default_factory=dict)
    acks: int = 0
    failures: int = 0
    error: str | None = None

    def run(self, stop: threading.Event) -> None:
        offset = 0
        while not stop.is_set():
            offset += 1
            # A random non-empty subset, so each partition's last acknowledged value differs.
            tps = [(TOPIC, p) for p in range(PARTITIONS) if self.rng.random() < 0.5]
            tps = tps or [(TOPIC, self.rng.randrange(PARTITIONS))]
            for tp in tps:
                self.sent.setdefault(tp, set()).add(offset)
            body = g.OffsetCommit(
                group_id=self.group,
                topics=[g.CommitTopic(name=TOPIC, partitions=[
                    g.CommitPartition(partition=p, offset=offset) for _, p in tps])],
            )  # fmt: skip
            try:
                reply = self.channel.call(
                    self.channel.shard_of(self.group), body, g.OffsetCommitResponse,
                    timeout_s=20, attempt_timeout_s=2,
                )  # fmt: skip
            except RequestError:
                self.failures += 1  # sent, never acknowledged: may or may not be applied
                continue
            errors = [p.error for t in reply.topics for p in t.partitions]
            if errors != [ErrorCode.NONE] * len(tps):
                self.error = f"commit {offset} of {self.group} answered {errors}"
                return
            for tp in tps:
                self.acked[tp] = offset
            self.acks += 1
            stop.wait(self.interval_s)


def run_kill_storm(
    broker: BrokerControl,
    root: Path,
    *,
    kills: int = 20,
    seed: int = 20240601,
    committers: int = 3,
    commit_interval_s: float = 0.02,
) -> KillStormFigures:
    started = time.monotonic()
    rng = random.Random(seed)
    with FailureCluster(broker, root, offsets_partitions=SHARDS) as cluster:
        for node in DAEMONS:
            cluster.start_daemon(node)
        cluster.wait_ready(DAEMONS)

        # One group per shard, so every kill hits some committer's coordinator.
        workers = [
            _Committer(cluster.group_channel(), group, commit_interval_s, random.Random(seed + i))
            for i in range(committers)
            for group in groups_on_shard(f"{cluster.prefix}storm-{i}-", i % SHARDS, SHARDS)
        ]
        stop = threading.Event()
        threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: all(w.acks > 0 for w in workers), timeout_s=60,
                       what="every committer acknowledged once")  # fmt: skip
            survived = 0
            for _ in range(kills):
                victim = rng.choice(DAEMONS)
                cluster.kill(victim)
                restarted = cluster.restart(victim)
                # Served again: the controller registered the new incarnation, and every
                # committer's coordinator acknowledged a commit after the restart.
                restarted.wait_for("node registered", timeout_s=120)
                marks = [w.acks for w in workers]

                def served(marks: list[int] = marks) -> bool:
                    progressed = all(w.acks > a for w, a in zip(workers, marks, strict=True))
                    return progressed or any(w.error for w in workers)

                wait_until(served, timeout_s=120, what=f"commits served after killing {victim}")
                assert not [w.error for w in workers if w.error], [w.error for w in workers]
                survived += 1
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert all(not t.is_alive() for t in threads), "a committer is stuck"
        assert not [w.error for w in workers if w.error], [w.error for w in workers]

        admin = cluster.group_admin()
        checked = 0
        unacked_applied = 0
        problems: list[str] = []
        for w in workers:
            committed = admin.committed(w.group)
            for tp, sent in sorted(w.sent.items()):
                acked = w.acked.get(tp)
                found = committed.get(tp)
                value = None if found is None else found.offset
                checked += 1
                if acked is not None and value == acked:
                    continue
                if value is not None and value in sent and (acked is None or value > acked):
                    unacked_applied += 1  # in flight when acks were lost, yet applied: legal
                    continue
                if acked is None and value is None:
                    continue  # never acknowledged, never applied
                problems.append(f"{w.group} {tp}: last acked {acked}, committed {value}, "
                                f"highest sent {max(sent)}")  # fmt: skip
        assert not problems, "acknowledged commits lost or changed:\n" + "\n".join(problems)

        epochs = cluster.controller_epochs()
        assert epochs, "no controller record in the metadata log"
        regressions = [(a, b) for a, b in itertools.pairwise(epochs) if b <= a]
        assert not regressions, f"controller epochs not strictly increasing: {epochs}"
        figures = KillStormFigures(
            kills_survived=survived,
            commits_acknowledged=sum(w.acks for w in workers),
            commits_checked=checked,
            unacknowledged_applied=unacked_applied,
            max_controller_epoch=epochs[-1],
            seconds=round(time.monotonic() - started, 1),
        )
    assert figures.kills_survived == kills
    report("kill_storm", broker, figures)
    return figures
