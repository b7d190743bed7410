"""A replicated in-memory key-value store: kafkacoord places and fails over its partitions.

Run a daemon (``./dev.sh daemon``), three nodes, a topic, then write and read:

    python examples/replicated_kv.py serve --node-id 1     # and 2, and 3
    kafkacoord topics create --topic kv --partitions 3 --replication-factor 3
    python examples/replicated_kv.py put --topic kv colour blue
    python examples/replicated_kv.py get --topic kv colour

kafkacoord's controller decides who leads and who follows each partition (a NodeAgent
calls back); the replication is this file's, built the way Kafka's brokers do it:

- A partition is a log of (leader epoch, key, value) entries. The leader appends writes;
  followers pull entries over a socket, each fetch carrying the follower's position.
- The leader acknowledges a write once every ISR member holds it (the high watermark,
  acks=all). The controller elects only ISR members, so a new leader holds every
  acknowledged write, even after a ``kill -9``.
- A follower that reaches the leader's end counts toward acknowledgements from then on,
  and reports caught up; the controller adds it to the ISR. The leader drops a follower
  that stays behind for LAG_S (AlterPartition); the controller drops a fenced node.
- Leader epochs fence: a leader answers only fetches of its own epoch, and a follower
  first cuts what the new leader does not hold (Kafka's OffsetsForLeaderEpoch).
- The leader serves reads from acknowledged writes, while its lease holds and once the
  writes of earlier leaders are acknowledged again under its own epoch.

Each node publishes its address in its registration (``endpoints={"kv": "host:port"}``);
clients and followers look it up in ``__kc_metadata``. Data lives in memory: the copies
on other nodes are its durability. The data port speaks plaintext JSON lines; the TLS
options secure the agent's connection to the daemons (as in replicated_service.py).
Nothing is acknowledged while the ISR is below the topic's ``min.insync.replicas``;
unclean leader election (off by default) would give up the guarantee.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import signal
import socket
import socketserver
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from tls_options import add_tls_options, client_tls

from kafkacoord.client import ClusterView
from kafkacoord.client.agent import NodeAgent
from kafkacoord.client.errors import RequestError
from kafkacoord.codecs.models import PartitionValue

ENDPOINT = "kv"  # the key of a node's data address in its registration
LAG_S = 10.0  # Kafka's replica.lag.time.max.ms: a follower behind this long leaves the ISR
ACK_TIMEOUT_S = 30.0  # a write waits this long for the ISR, then the client retries
Entry = tuple[int, str, str]  # (leader epoch, key, value)
Message = dict[str, Any]


class Connection:
    """One JSON object per line each way, over TCP."""

    def __init__(self, address: str, timeout_s: float) -> None:
        host, port = address.rsplit(":", 1)
        self._socket = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._stream = self._socket.makefile("rwb")

    def call(self, request: Message) -> Message:
        self._stream.write(json.dumps(request).encode() + b"\n")
        self._stream.flush()
        line = self._stream.readline()
        if not line:
            raise ConnectionError("connection closed")
        reply: Message = json.loads(line)
        return reply

    def close(self) -> None:
        self._stream.close()
        self._socket.close()


class Replica:
    """One partition on this node. Every field is guarded by ``changed``."""

    def __init__(self) -> None:
        self.log: list[Entry] = []
        self.hw = 0  # the high watermark: entries below it are acknowledged
        self.table: dict[str, str] = {}  # the entries below ``applied``
        self.applied = 0
        self.role: str | None = None  # "leader", "follower", or None once stopped
        self.epoch = -1  # the leader epoch of the current role
        self.leader = -1
        self.epoch_start = 0  # leader: the log's end when this leadership began
        self.positions: dict[int, int] = {}  # leader: each follower's last fetch position
        self.caught_up_at: dict[int, float] = {}  # leader: when each last reached the end
        self.joining: set[int] = set()  # leader: caught up, maybe not yet seen in the ISR
        self.changed = threading.Condition()

    def commit(self, hw: int) -> None:
        """Raise the high watermark (never lower it) and apply what it acknowledges."""
        self.hw = max(self.hw, min(hw, len(self.log)))
        for _, key, value in self.log[self.applied : self.hw]:
            self.table[key] = value
        self.applied = self.hw
        self.changed.notify_all()

    def truncate(self, end: int) -> None:
        """Drop entries from ``end`` on: a new leader does not hold them."""
        del self.log[end:]
        if self.applied > end:  # not below acknowledged writes; rebuilt to stay simple
            hw, self.hw, self.applied, self.table = min(self.hw, end), 0, 0, {}
            self.commit(hw)

    def last_epoch(self) -> int:
        return self.log[-1][0] if self.log else -1

    def end_of_epoch(self, epoch: int) -> int:
        """Where this log's entries of ``epoch`` and older end (epochs only grow along it)."""
        return bisect.bisect_right(self.log, epoch, key=lambda entry: entry[0])


class KeyValueNode:
    """The agent's PartitionHandler, and the handler of peers' and clients' requests."""

    def __init__(self, node_id: int, cluster: ClusterView) -> None:
        self.node_id = node_id
        self.cluster = cluster
        self.agent: NodeAgent | None = None  # set before the agent starts
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.stopping = threading.Event()

    # -- roles, called back by the agent on its thread, in metadata order ---------------

    def on_become_leader(self, topic: str, partition: int, state: PartitionValue) -> None:
        replica = self.replicas.setdefault((topic, partition), Replica())
        with replica.changed:
            self._take(replica, "leader", state)  # the log is kept: it holds every ack
            replica.epoch_start = len(replica.log)
            replica.positions.clear()
            replica.joining.clear()
            replica.caught_up_at = dict.fromkeys(state.isr, time.monotonic())
            size = len(replica.log)
        print(f"leading   {topic}-{partition} (leader epoch {state.leader_epoch}, "
              f"{size} entries)", flush=True)  # fmt: skip

    def on_become_follower(self, topic: str, partition: int, state: PartitionValue) -> None:
        replica = self.replicas.setdefault((topic, partition), Replica())
        with replica.changed:
            self._take(replica, "follower", state)
        print(f"following {topic}-{partition} (leader {state.leader}, "
              f"leader epoch {state.leader_epoch})", flush=True)  # fmt: skip
        threading.Thread(target=self._follow, args=(topic, partition, replica, state.leader_epoch),
                         daemon=True).start()  # fmt: skip

    def on_stop_replica(self, topic: str, partition: int, deleted: bool) -> None:
        replica = self.replicas.pop((topic, partition), None)
        if replica is not None:
            with replica.changed:
                replica.role = None
                replica.changed.notify_all()
        print(f"stopped   {topic}-{partition}{' (deleted)' if deleted else ''}", flush=True)

    @staticmethod
    def _take(replica: Replica, role: str, state: PartitionValue) -> None:
        replica.role, replica.epoch, replica.leader = role, state.leader_epoch, state.leader
        replica.changed.notify_all()  # writes waiting under an older role give up

    # -- leader ---------------------------------------------------------------------------

    def handle(self, request: Message) -> Message:
        replica = self.replicas.get((request["topic"], request["partition"]))
        if replica is None:
            return {"error": "not_leader"}
        with replica.changed:
            if replica.role != "leader":
                return {"error": "not_leader"}
            if request["op"] == "fetch":
                return self._fetch(request, replica)
            if request["op"] == "put":
                return self._put(request, replica)
            return self._get(request, replica)

    def _advance(self, topic: str, partition: int, replica: Replica) -> None:
        """Raise the high watermark to what every ISR member holds (acks=all)."""
        assert self.agent is not None
        state = self.agent.replica_state(topic, partition)
        if state is None or (state.leader, state.leader_epoch) != (self.node_id, replica.epoch):
            return  # deposed: nothing more is acknowledged here
        if len(state.isr) < self.cluster.min_insync_replicas(topic):
            return  # KIP-966: those that left a too-small ISR stay eligible to lead
        replica.joining -= set(state.isr)
        members = (set(state.isr) | replica.joining) - {self.node_id}
        replica.commit(min([len(replica.log), *(replica.positions.get(n, 0) for n in members)]))

    def _put(self, request: Message, replica: Replica) -> Message:
        topic, partition, epoch = request["topic"], request["partition"], replica.epoch
        replica.log.append((epoch, request["key"], request["value"]))
        offset = len(replica.log)
        replica.changed.notify_all()  # wakes the followers' fetches
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while (replica.role, replica.epoch) == ("leader", epoch):
            self._advance(topic, partition, replica)
            if replica.hw >= offset:
                return {"ok": True, "leader": self.node_id}
            if time.monotonic() > deadline:
                break
            replica.changed.wait(0.2)  # the ISR may shrink without a fetch to wake us
        return {"error": "not_acknowledged"}  # it may survive or not: the client retries

    def _get(self, request: Message, replica: Replica) -> Message:
        assert self.agent is not None
        self._advance(request["topic"], request["partition"], replica)
        if not self.agent.leased():
            return {"error": "not_leader"}  # cut off: another node may lead by now
        if replica.hw < replica.epoch_start:
            return {"error": "not_ready"}  # earlier leaders' writes not yet re-acknowledged
        return {"value": replica.table.get(request["key"])}

    def _fetch(self, request: Message, replica: Replica) -> Message:
        epoch, position, follower = request["epoch"], request["position"], request["node"]
        if epoch != replica.epoch:
            return {"error": "wrong_epoch"}  # a stale follower, or one ahead of our metadata
        if position > 0 and (
            position > len(replica.log) or replica.log[position - 1][0] != request["last_epoch"]
        ):
            # The follower holds entries this log does not: it keeps what both hold.
            return {"truncate": min(position - 1, replica.end_of_epoch(request["last_epoch"]))}
        replica.positions[follower] = position
        caught_up = position == len(replica.log)
        if caught_up:
            replica.caught_up_at[follower] = time.monotonic()
            replica.joining.add(follower)  # counted in acks before the ISR shows it
        self._advance(request["topic"], request["partition"], replica)
        if caught_up:
            replica.changed.wait(0.5)  # long poll: back as soon as a write arrives
        if (replica.role, replica.epoch) != ("leader", epoch):
            return {"error": "wrong_epoch"}
        return {"entries": replica.log[position : position + 1000], "hw": replica.hw,
                "caught_up": caught_up}  # fmt: skip

    def shrink_laggards(self) -> None:
        """Leader: ask the controller to drop followers behind for LAG_S from the ISR."""
        assert self.agent is not None
        for (topic, partition), replica in list(self.replicas.items()):
            with replica.changed:
                state = self.agent.replica_state(topic, partition)
                if replica.role != "leader" or state is None or state.leader_epoch != replica.epoch:
                    continue
                now, epoch = time.monotonic(), replica.epoch
                lagging = {n for n in (set(state.isr) | replica.joining) - {self.node_id}
                           if now - replica.caught_up_at.setdefault(n, now) > LAG_S}  # fmt: skip
            if not lagging:
                continue
            try:
                self.agent.alter_isr(topic, partition, [n for n in state.isr if n not in lagging])
            except RequestError as exc:  # a newer state is on its way: the next round retries
                print(f"ISR of {topic}-{partition} unchanged: {exc}", flush=True)
                continue
            with replica.changed:
                if replica.epoch == epoch:
                    replica.joining -= lagging  # out of the ISR for sure: stop waiting for them
            print(f"dropped {sorted(lagging)} from the ISR of {topic}-{partition}", flush=True)

    # -- follower -------------------------------------------------------------------------

    def _follow(self, topic: str, partition: int, replica: Replica, epoch: int) -> None:
        """Pull from the leader of ``epoch`` until this replica's role changes."""
        assert self.agent is not None
        connection: Connection | None = None
        reported = 0.0
        while not self.stopping.is_set():
            with replica.changed:
                if (replica.role, replica.epoch) != ("follower", epoch):
                    break
                position, leader = len(replica.log), replica.leader
                request = {"op": "fetch", "topic": topic, "partition": partition, "epoch": epoch,
                           "node": self.node_id, "position": position,
                           "last_epoch": replica.last_epoch()}  # fmt: skip
            try:
                if connection is None:
                    address = self.cluster.endpoint(leader, ENDPOINT)
                    if address is None:
                        raise ConnectionError(f"node {leader} has published no address yet")
                    connection = Connection(address, timeout_s=5)
                reply = connection.call(request)
            except OSError:
                if connection is not None:
                    connection.close()
                connection = None
                self.stopping.wait(0.5)
                continue
            with replica.changed:
                if (replica.role, replica.epoch, len(replica.log)) != ("follower", epoch, position):
                    continue
                if "truncate" in reply:
                    replica.truncate(reply["truncate"])
                    continue
                if "error" not in reply:
                    replica.log.extend((e, k, v) for e, k, v in reply["entries"])
                    replica.commit(reply["hw"])
            if "error" in reply:  # the leader has not seen this leadership yet
                self.stopping.wait(0.2)
                continue
            state = self.agent.replica_state(topic, partition)
            in_isr = state is not None and self.node_id in state.isr
            if reply["caught_up"] and not in_isr and time.monotonic() - reported > 1:
                reported = time.monotonic()
                try:  # refused once the leadership of ``epoch`` is over
                    self.agent.report_caught_up(topic, partition, leader_epoch=epoch)
                    print(f"caught up {topic}-{partition} at {position} entries", flush=True)
                except RequestError as exc:
                    print(f"caught up {topic}-{partition}, report refused: {exc}", flush=True)
        if connection is not None:
            connection.close()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], node: KeyValueNode) -> None:
        super().__init__(address, Requests)
        self.node = node


class Requests(socketserver.StreamRequestHandler):
    server: Server

    def handle(self) -> None:
        with contextlib.suppress(OSError):  # the peer went away
            for line in self.rfile:
                reply = self.server.node.handle(json.loads(line))
                self.wfile.write(json.dumps(reply).encode() + b"\n")


class KeyValueClient:
    """Sends each key to its partition's leader, found in the metadata; retries through
    failovers until ``timeout_s``."""

    def __init__(self, bootstrap: str, topic: str, *, topic_prefix: str = "__kc_",
                 timeout_s: float = 60.0) -> None:  # fmt: skip
        self.cluster = ClusterView(bootstrap, topic_prefix=topic_prefix).wait_ready()
        self.topic, self.timeout_s = topic, timeout_s
        described = self.cluster.topic(topic)
        if described is None:
            raise SystemExit(f"no topic {topic!r}: create it with `kafkacoord topics create`")
        self.partitions = described.num_partitions
        self._connections: dict[str, Connection] = {}

    def partition(self, key: str) -> int:
        return zlib.crc32(key.encode()) % self.partitions

    def put(self, key: str, value: str) -> int:
        """Returns the node that acknowledged the write."""
        leader: int = self._call({"op": "put", "key": key, "value": value})["leader"]
        return leader

    def get(self, key: str) -> str | None:
        value: str | None = self._call({"op": "get", "key": key})["value"]
        return value

    def _call(self, request: Message) -> Message:
        partition = self.partition(request["key"])
        request = {**request, "topic": self.topic, "partition": partition}
        deadline = time.monotonic() + self.timeout_s
        while True:
            address = self.cluster.leader_endpoint(self.topic, partition, ENDPOINT)
            try:
                if address is None:
                    raise ConnectionError(f"{self.topic}-{partition} has no leader")
                if address not in self._connections:
                    self._connections[address] = Connection(address, ACK_TIMEOUT_S + 5)
                reply = self._connections[address].call(request)
            except OSError as exc:
                stale = self._connections.pop(address or "", None)
                if stale is not None:
                    stale.close()
                reply = {"error": str(exc)}
            if "error" not in reply:
                return reply
            if time.monotonic() > deadline:
                raise TimeoutError(f"{request['op']} {request['key']!r}: {reply['error']}")
            time.sleep(0.2)  # a failover is under way: the metadata will name the new leader

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self.cluster.close()


def serve(args: argparse.Namespace, bootstrap: str) -> None:
    cluster = ClusterView(bootstrap, topic_prefix=args.topic_prefix)
    node = KeyValueNode(args.node_id, cluster)
    server = Server((args.host, args.port), node)
    address = f"{args.host}:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    agent = NodeAgent(bootstrap, node_id=args.node_id, handler=node, rack=args.rack,
                      endpoints={ENDPOINT: address}, topic_prefix=args.topic_prefix,
                      tls=client_tls(args))  # fmt: skip
    node.agent = agent
    agent.start()
    print(f"node {args.node_id} registered, serving on {address}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(1.0):
        node.shrink_laggards()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C ends the process at once
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:  # hand leaderships to ISR members: they hold every acknowledged write
        remaining = agent.controlled_shutdown(timeout_s=5)
        left = ", ".join(f"{r.topic}-{r.partition}" for r in remaining) or "none"
        print(f"stopping: leaderships moved away (still leading: {left})", flush=True)
    except RequestError as exc:
        print(f"stopping: no controlled shutdown ({exc})", flush=True)
    node.stopping.set()
    server.shutdown()
    agent.close()
    cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", help="default: the local daemon's embedded broker")
    parser.add_argument("--topic-prefix", default="__kc_", help="the daemon's topic_prefix")
    commands = parser.add_subparsers(dest="command", required=True)
    node = commands.add_parser("serve", help="run a node")
    node.add_argument("--node-id", type=int, required=True)
    node.add_argument("--rack")
    node.add_argument("--host", default="127.0.0.1", help="the address to listen on and publish")
    node.add_argument("--port", type=int, default=0, help="default: any free port")
    add_tls_options(node)
    put = commands.add_parser("put", help="write KEY VALUE pairs; each once acknowledged")
    put.add_argument("--topic", required=True)
    put.add_argument("pairs", nargs="+", metavar="KEY VALUE")
    get = commands.add_parser("get", help="read KEYs; exits 1 if one is missing")
    get.add_argument("--topic", required=True)
    get.add_argument("keys", nargs="+", metavar="KEY")
    args = parser.parse_args()
    bootstrap = args.bootstrap or Path("var/kafkacoord/bootstrap").read_text().strip()
    if args.command == "serve":
        serve(args, bootstrap)
        return
    client = KeyValueClient(bootstrap, args.topic, topic_prefix=args.topic_prefix)
    missing = []
    try:
        if args.command == "put":
            if len(args.pairs) % 2:
                parser.error("put takes KEY VALUE pairs")
            for key, value in zip(args.pairs[::2], args.pairs[1::2], strict=True):
                leader = client.put(key, value)
                print(f"{key} = {value}  (acknowledged by node {leader}, "
                      f"{args.topic}-{client.partition(key)})", flush=True)  # fmt: skip
        else:
            for key in args.keys:
                value = client.get(key)
                if value is None:
                    missing.append(key)
                print(f"{key} = {value if value is not None else '(missing)'}", flush=True)
    finally:
        client.close()
    if missing:
        sys.exit(f"missing: {' '.join(missing)}")


if __name__ == "__main__":
    main()
