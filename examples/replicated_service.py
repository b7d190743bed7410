"""A tiny replicated key-value "service" placed and failed over by kafkacoord.

Run a daemon (``./dev.sh daemon``), then a few of these with different ids:

    python examples/replicated_service.py --node-id 1
    python examples/replicated_service.py --node-id 2
    kafkacoord topics create --topic kv --partitions 6 --replication-factor 2

Under mutual TLS give ``--tls-ca``, ``--tls-cert`` and ``--tls-key`` (or the
``KAFKACOORD_TLS_*`` variables): the certificate's subject must be mapped to the node
id in the daemons' ``node_principals``.

Each process prints the partitions it leads or follows; kill one and watch the
others take over its leaderships.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path

from tls_options import add_tls_options, client_tls

from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.errors import RequestError
from kafkacoord.codecs.models import PartitionValue


class KeyValueShards:
    def __init__(self) -> None:
        self.agent: NodeAgent | None = None

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
        print(f"leading   {topic}-{partition} (leader epoch {state.leader_epoch})", flush=True)

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
        print(f"following {topic}-{partition} (leader {state.leader})", flush=True)
        if self.agent is not None and self.agent.node_id not in state.isr:
            self._catch_up(self.agent, topic, partition, state)

    def on_leave_isr(self, topic: str, partition: int, state: PartitionValue) -> None:
        print(f"out of the ISR of {topic}-{partition} (leader {state.leader})", flush=True)
        if self.agent is not None:
            self._catch_up(self.agent, topic, partition, state)

    def _catch_up(
        self, agent: NodeAgent, topic: str, partition: int, state: PartitionValue
    ) -> None:
        # A real follower would copy the leader's data first, then report.
        threading.Thread(
            target=self._report_caught_up,
            args=(agent, topic, partition, state.leader_epoch),
            daemon=True,
        ).start()

    @staticmethod
    def _report_caught_up(agent: NodeAgent, topic: str, partition: int, epoch: int) -> None:
        """Report until the controller takes it: a report sent while this node is fenced
        (back from a pause, say) is refused, and nothing would call back to send it again.
        A new leadership brings its own callback, so this one stops there."""
        delay = 0.5
        while (state := agent.replica_state(topic, partition)) is not None:
            if state.leader_epoch != epoch or agent.node_id in state.isr:
                return
            try:
                agent.report_caught_up(topic, partition, leader_epoch=epoch)
                print(f"caught up {topic}-{partition} (leader epoch {epoch})", flush=True)
                return
            except RequestError as exc:
                print(f"caught up {topic}-{partition}, report refused: {exc}", flush=True)
            except (KeyError, OSError):  # the replica went away, or the agent closed
                return
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
        print(f"stopped   {topic}-{partition}{' (deleted)' if deleted else ''}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--rack")
    parser.add_argument("--bootstrap", help="default: the local daemon's embedded broker")
    parser.add_argument("--topic-prefix", default="__kc_", help="the daemon's topic_prefix")
    add_tls_options(parser)
    args = parser.parse_args()
    bootstrap = args.bootstrap or Path("var/kafkacoord/bootstrap").read_text().strip()
    shards = KeyValueShards()
    agent = NodeAgent(
        bootstrap,
        node_id=args.node_id,
        handler=shards,
        rack=args.rack,
        topic_prefix=args.topic_prefix,
        tls=client_tls(args),
    )
    shards.agent = agent
    agent.start()
    print(f"node {args.node_id} registered", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    # A second Ctrl-C ends the process at once.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        remaining = agent.controlled_shutdown(timeout_s=5)
        left = ", ".join(f"{r.topic}-{r.partition}" for r in remaining) or "none"
        print(f"stopping: leaderships moved away (still leading: {left})", flush=True)
    except RequestError as exc:  # the daemon is gone: nobody to hand leaderships to
        print(f"stopping: no controlled shutdown ({exc})", flush=True)
    agent.close()


if __name__ == "__main__":
    main()
