"""A consumer-group worker coordinated by kafkacoord instead of the broker.

    python examples/group_worker.py --group billing --topic events

Start several: the partitions of ``events`` are shared among them with the
cooperative-sticky assignor, and each commits what it processed. Under mutual TLS
give ``--tls-ca``, ``--tls-cert`` and ``--tls-key`` (or the ``KAFKACOORD_TLS_*``
variables): any certificate the daemons' CA signed will do.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tls_options import add_tls_options, client_tls

from kafkacoord.client import group_member


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--bootstrap", help="default: the local daemon's embedded broker")
    parser.add_argument("--topic-prefix", default="__kc_", help="the daemon's topic_prefix")
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="create the topic on the broker with this many partitions if missing",
    )
    add_tls_options(parser)
    args = parser.parse_args()
    bootstrap = args.bootstrap or Path("var/kafkacoord/bootstrap").read_text().strip()
    if args.partitions:
        ensure_topic(bootstrap, args.topic, args.partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": args.group,
                         "enable.auto.commit": False})  # fmt: skip
    lock = threading.Lock()

    def assigned(partitions: frozenset[tuple[str, int]]) -> None:
        committed = member.committed(partitions)
        with lock:
            consumer.incremental_assign(
                [TopicPartition(t, p, committed.get((t, p), 0)) for t, p in sorted(partitions)]
            )
        print("assigned", sorted(partitions), flush=True)

    def revoked(partitions: frozenset[tuple[str, int]]) -> None:
        with lock:
            consumer.incremental_unassign([TopicPartition(t, p) for t, p in partitions])
        print("revoked", sorted(partitions), flush=True)

    member = group_member(bootstrap, args.group, [args.topic], assignors=["cooperative-sticky"],
                          on_assigned=assigned, on_revoked=revoked,
                          topic_prefix=args.topic_prefix, tls=client_tls(args))  # fmt: skip
    member.start()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        with lock:
            messages = consumer.consume(500, 0.2)
        positions = {(m.topic() or "", m.partition() or 0): (m.offset() or 0) + 1
                     for m in messages if not m.error()}  # fmt: skip
        if positions:
            try:
                member.commit(positions)
            except Exception as exc:  # a rebalance is under way; the next batch commits
                print("commit skipped:", exc, flush=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C ends the process at once
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    member.close()  # leaves the group (at most 5 s when the daemon is gone)
    consumer.close()
    print(f"stopping: left group {args.group}", flush=True)


if __name__ == "__main__":
    main()
