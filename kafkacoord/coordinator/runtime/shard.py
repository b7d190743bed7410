"""The contract between a state machine and the runtime that hosts it.

See docs/architecture.md#shard-runtime.

A shard is deterministic and does no I/O. Handlers and timers return a :class:`Result`:
records to append, replies to send, and post-commit actions. The runtime replays the
records into the shard at once (so later handlers see them), appends them durably,
then runs the actions and only then releases the replies. ``replay`` is the only way
persisted state changes, and loading uses the same ``replay``: it has no "live" branch.
What may happen only once the records are durable (a classic group's move to Stable, an
election counted as decided) is a post-commit action, as Kafka's handlers chain work on
their append future.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafkacoord.codecs import encode_record
from kafkacoord.codecs.batch_size import record_bytes
from kafkacoord.codecs.models import AvroModel
from kafkacoord.codecs.models.base import value_class_with_init
from kafkacoord.coordinator.protocol import Body, ErrorCode
from kafkacoord.coordinator.protocol.binary import RequestBody

RawRecord = tuple[bytes, bytes | None]
"""An encoded key and value (``None``: a tombstone), as a writer appends it."""


@value_class_with_init
class Record:
    """One record to append: a key and its whole new value, or ``None`` (a tombstone).

    ``in_memory`` marks a record whose change the handler already holds in memory: a
    classic group's snapshot, as Kafka's classic groups are soft state (its
    ``CoordinatorResult`` with ``replayRecords`` false). The runtime appends it without
    replaying it; loading replays it like any other.
    """

    key: AvroModel
    value: AvroModel | None
    in_memory: bool = field(default=False, compare=False)
    # The record's bytes once :func:`encode_records` has made them: a record that cannot
    # be encoded is found inside its handler's guard, before anything replays it.
    raw: RawRecord | None = field(default=None, compare=False, repr=False)

    def __init__(
        self, key: AvroModel, value: AvroModel | None, in_memory: bool = False,
        raw: RawRecord | None = None,
    ) -> None:  # fmt: skip
        self.key = key
        self.value = value
        self.in_memory = in_memory
        self.raw = raw


def encode_records(records: Sequence[Record]) -> None:
    """Encode every record not encoded yet, keeping its bytes on it.

    Handlers and timers call it inside their guard, so a value its Avro type cannot hold
    fails that handler (its soft state put back) rather than the append of a whole turn.
    The runtime encodes whatever is left before it replays a result.
    """
    for record in records:
        if record.raw is None:
            # The one field set after construction: bytes of the same value, not state.
            record.raw = encode_record(record.key, record.value)


def encoded_bytes(records: Sequence[Record]) -> int:
    """The most ``records`` take in a batch, encoding any that are not encoded yet."""
    encode_records(records)
    size = 0
    for record in records:
        size += record_bytes(record.raw)  # type: ignore[arg-type]
    return size


def raw_records(records: Sequence[Record]) -> list[RawRecord]:
    """The records' bytes, encoding any that are not encoded yet."""
    encode_records(records)
    return [r.raw for r in records]  # type: ignore[misc]


class ReplyChannel(Protocol):
    """The connection a request came in on; its replies go back the same way."""

    def deliver(self, replies: Sequence[Reply]) -> None:
        """Queue replies for sending; thread-safe, never blocks on the network."""


@value_class_with_init
class RequestRef:
    """Who asked: the caller's client id and correlation id, and where to answer.

    A retry reuses its correlation id, so (client id, correlation id) names one call
    across reconnects; ``channel`` is None for requests made in-process. ``principal`` is
    the connection's authenticated principal (mutual TLS), which the controller records in
    the cause of an admin request's decisions.
    """

    client_id: str
    correlation_id: int
    channel: ReplyChannel | None = field(default=None, compare=False)
    principal: str | None = field(default=None, compare=False)
    # The request's api version: its reply's body is encoded the same way (0: JSON).
    api_version: int = field(default=0, compare=False)

    def __init__(
        self, client_id: str, correlation_id: int, channel: ReplyChannel | None = None,
        principal: str | None = None, api_version: int = 0,
    ) -> None:  # fmt: skip
        self.client_id = client_id
        self.correlation_id = correlation_id
        self.channel = channel
        self.principal = principal
        self.api_version = api_version

    def __deepcopy__(self, memo: dict[int, object]) -> RequestRef:
        # Immutable, and its channel is a live connection: a copied group shares it.
        return self


@value_class_with_init
class Request:
    """A decoded request for one shard: who asked, the API name, and its validated body."""

    ref: RequestRef
    api: str
    body: RequestBody

    def __init__(self, ref: RequestRef, api: str, body: RequestBody) -> None:
        self.ref = ref
        self.api = api
        self.body = body


@value_class_with_init
class Reply:
    """The answer to one request: a body, or an error code with a message. Released only
    after the records of the same result are durable."""

    to: RequestRef
    api: str
    error: ErrorCode = ErrorCode.NONE
    body: Body | None = None
    message: str | None = None
    # The body's encoding at ``to.api_version`` when its maker already has it (a body
    # shared by many replies).
    encoded: bytes | None = field(default=None, compare=False, repr=False)

    def __init__(
        self, to: RequestRef, api: str, error: ErrorCode = ErrorCode.NONE,
        body: Body | None = None, message: str | None = None, *,
        encoded: bytes | None = None,
    ) -> None:  # fmt: skip
        self.to = to
        self.api = api
        self.error = error
        self.body = body
        self.message = message
        self.encoded = encoded


PostCommit = Callable[[], Sequence[Reply]]
"""Work that waits for a result's records to be durable; it may answer parked requests."""


@dataclass(slots=True)
class Result:
    """What a handler or timer returns: records to replay and append, replies to release
    once they are durable, and post-commit actions run just before those replies go.

    Handlers never change persisted state themselves. An append that fails drops the
    actions with the replies: the shard reloads from what is durable.
    """

    records: list[Record] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    actions: list[PostCommit] = field(default_factory=list)

    # Written out: mypyc compiles it, where the dataclass's generated one is interpreted.
    def __init__(
        self, records: list[Record] | None = None, replies: list[Reply] | None = None,
        actions: list[PostCommit] | None = None,
    ) -> None:  # fmt: skip
        self.records = [] if records is None else records
        self.replies = [] if replies is None else replies
        self.actions = [] if actions is None else actions

    def extend(self, other: Result) -> Result:
        self.records.extend(other.records)
        self.replies.extend(other.replies)
        self.actions.extend(other.actions)
        return self

    def committed(self) -> list[Reply]:
        """Run the post-commit actions (the records are durable): every reply to release."""
        if not self.actions:
            return self.replies
        replies = list(self.replies)
        for action in self.actions:
            replies.extend(action())
        return replies

    def __bool__(self) -> bool:
        return bool(self.records or self.replies or self.actions)


def replay_result(shard: Shard, result: Result) -> Result:
    """What the runtime does with a handler's result before appending it: replay each
    record the handler does not already hold in memory, so later handlers see it."""
    for record in result.records:
        if not record.in_memory:
            shard.replay(record)
    return result


class ReplySink(Protocol):
    """Where a host hands the replies of a durable batch."""

    def send(self, replies: Sequence[Reply]) -> None:
        """Hand replies to their channels (the runtime calls it after the append)."""


def send_replies(replies: Sequence[Reply]) -> None:
    """Deliver replies to the channels they name, one hand-over per channel."""
    if len(replies) == 1:
        channel = replies[0].to.channel
        if channel is not None:
            channel.deliver(replies)
        return
    by_channel: dict[int, tuple[ReplyChannel, list[Reply]]] = {}
    for reply in replies:
        channel = reply.to.channel
        if channel is None:
            continue
        entry = by_channel.get(id(channel))
        if entry is None:
            by_channel[id(channel)] = (channel, [reply])
        else:
            entry[1].append(reply)
    for channel, batch in by_channel.values():
        channel.deliver(batch)


class ChannelReplies:
    """The runtime's reply sink: every reply goes back on the connection it came from."""

    def send(self, replies: Sequence[Reply]) -> None:
        if replies:
            send_replies(replies)


class Shard(Protocol):
    """A deterministic state machine over one partition of an internal topic, with no I/O and
    no clock: ``replay`` is its only state change, on writes and on loads alike."""

    def replay(self, record: Record) -> None:
        """Apply one durable (or about-to-be-durable) record: the only state change."""

    def on_loaded(self, now_ms: int) -> Result:
        """Called once the log is replayed to its end: schedule timers, resume work."""

    def handle(self, request: Request, now_ms: int) -> Result:
        """Answer a request; never mutates persisted state directly."""

    def fire_timers(self, now_ms: int) -> Result:
        """Run every timer due at ``now_ms``."""

    def next_deadline_ms(self) -> int | None:
        """When the earliest timer is due, or ``None`` when none is scheduled."""

    def on_unloaded(self) -> list[Reply]:
        """The shard moves away: answer every parked request (NOT_COORDINATOR)."""
