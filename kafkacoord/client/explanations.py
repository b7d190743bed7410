"""Why a partition changed, in plain words: its records in order, each with the change
and the decision's cause (docs/architecture.md#causes). Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kafkacoord.codecs.models import DecisionKey, DecisionValue, PartitionValue, Trigger
from kafkacoord.codecs.models import TriggerKind as K

from .instants import format_instant

__all__ = ["PartitionStep", "explain_partition", "rule_words", "trigger_words"]

# How the leader was chosen (PartitionValue.cause.rule).
_RULES: Final = {
    "initial": "the first live replica at creation",
    "offline": "chosen from the ISR",
    "controlled_shutdown": "chosen from the ISR, off the node shutting down",
    "preferred": "the preferred replica",
    "reassigned": "chosen from the new replicas",
    "elr": "chosen from the ELR (KIP-966: it holds every committed record)",
    "last_known_leader": "the last known leader, the only replica known to hold every record",
    "unclean": "an unclean election: chosen outside the ISR, committed records may be lost",
    "none": "no replica could lead: the partition is offline",
}
_TRACKED: Final = ("leader", "leader_epoch", "isr", "elr", "replicas", "partition_epoch", "state")


def clock(ms: int) -> str:
    """HH:MM:SS in UTC, as the lines print times."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


def rule_words(rule: str) -> str:
    return _RULES.get(rule, f"rule {rule!r}")


def trigger_words(t: Trigger) -> str:
    """The trigger as a clause: ``node 3's session expired (last heartbeat 10:02:02)``."""
    node = f"node {t.node_id}"
    if t.kind == K.SESSION_EXPIRED:
        beat = f" (last heartbeat {clock(t.heartbeat_ms)})" if t.heartbeat_ms >= 0 else ""
        return f"{node}'s session expired{beat}"
    if t.kind == K.ADMIN_REQUEST:
        who = t.principal or "an unauthenticated client"
        request = f", request {t.request_id}" if t.request_id else ""
        return f"{t.api or 'an admin request'} by {who}{request}"
    if t.kind == K.ISR_CHANGE:
        return f"an ISR change reported by {node}" + (f" ({t.api})" if t.api else "")
    if t.kind == K.REBALANCE_PLAN:
        return f"step {t.plan_step} of rebalance plan {t.plan_id}"
    if t.kind == K.LEADER_REBALANCE:
        figure = f" (imbalance {t.imbalance:.2f})" if t.imbalance is not None else ""
        return f"auto leader rebalance{figure}"
    return {
        K.CONTROLLED_SHUTDOWN: f"{node} shut down (controlled)",
        K.TOPIC_CREATED: "the topic was created",
        K.PARTITIONS_CREATED: "partitions were added",
        K.TOPIC_DELETED: "the topic was deleted",
        K.NODE_REGISTERED: f"{node} registered",
        K.NODE_UNFENCED: f"{node} was unfenced (heartbeating again)",
        K.NODE_FENCED: f"{node} was fenced",
        K.CONTROLLER_ACTIVATED: "a new controller took over",
        K.INTERNAL_TOPICS: "kafkacoord's internal topics were set up",
    }.get(t.kind, t.kind.replace("_", " "))


@dataclass(frozen=True, slots=True)
class PartitionStep:
    """One record of a partition's history, explained."""

    offset: int
    time_ms: int
    changes: Mapping[str, tuple[Any, Any]]
    decision: DecisionKey | None
    trigger: Trigger | None
    rule: str
    cause_text: str
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "time_ms": self.time_ms,
            "time": format_instant(self.time_ms),
            "changes": {f: [_plain(b), _plain(a)] for f, (b, a) in self.changes.items()},
            "decision": None if self.decision is None else {
                "controller_epoch": self.decision.controller_epoch,
                "sequence": self.decision.sequence,
            },
            "trigger": None if self.trigger is None else _plain(self.trigger.to_avro()),
            "rule": self.rule,
            "cause": self.cause_text,
            "text": self.text,
        }  # fmt: skip


def _order(key: DecisionKey) -> tuple[int, int]:
    return key.controller_epoch, key.sequence


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return getattr(value, "value", value)  # an enum's value


def _changes(before: PartitionValue | None, after: PartitionValue) -> dict[str, tuple[Any, Any]]:
    if before is None:
        return {f: (None, getattr(after, f)) for f in _TRACKED}
    return {f: (b, a) for f in _TRACKED if (b := getattr(before, f)) != (a := getattr(after, f))}


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(_plain(value))


def _change_words(changes: Mapping[str, tuple[Any, Any]], created: bool) -> tuple[str, list[str]]:
    """The headline (leader and epoch) and the other changes, as in
    ``leader 3 → 1, epoch 7 → 8`` and ``ISR [3,1] → [1]``."""
    if created:
        _, leader = changes["leader"]
        _, replicas = changes["replicas"]
        return f"created on replicas {_show(replicas)}, leader {leader}", []
    head = []
    if "leader" in changes:
        head.append("leader {} → {}".format(*map(_show, changes["leader"])))
    if "leader_epoch" in changes:
        head.append("epoch {} → {}".format(*map(_show, changes["leader_epoch"])))
    names = {"isr": "ISR", "elr": "ELR", "replicas": "replicas", "state": "state"}
    rest = [
        f"{names[f]} {_show(changes[f][0])} → {_show(changes[f][1])}" for f in names if f in changes
    ]
    if not head and "partition_epoch" in changes:
        head.append("partition epoch {} → {}".format(*map(_show, changes["partition_epoch"])))
    if not head:  # the leader stayed: the first other change heads the line
        return (rest[0], rest[1:]) if rest else ("no change", [])
    return ", ".join(head), rest


def explain_partition(
    records: Iterable[tuple[int, int, PartitionValue | None]],
    decisions: Mapping[DecisionKey, DecisionValue],
    expired_before: DecisionKey | None = None,
) -> list[PartitionStep]:
    """``records``: (offset, time, value) of one partition's key in log order, None for a
    tombstone. ``decisions``: every decision record read. A decision missing from them was
    tombstoned by retention if it is older than ``expired_before`` (the oldest kept)."""
    steps: list[PartitionStep] = []
    before: PartitionValue | None = None
    for offset, time_ms, value in records:
        if value is None:
            text = f"{clock(time_ms)} deleted (its topic was deleted)"
            steps.append(PartitionStep(offset, time_ms, {}, None, None, "", "deleted", text))
            before = None
            continue
        changes = _changes(before, value)
        cause = value.cause
        trigger, cause_text, rule = None, "cause not recorded (written before causes)", ""
        if cause is not None:
            rule = cause.rule
            decision = decisions.get(cause.decision)
            if decision is not None:
                trigger = decision.trigger
                cause_text = trigger_words(trigger)
            elif expired_before is not None and _order(cause.decision) < _order(expired_before):
                cause_text = "its decision's record has expired (decision_retention_ms)"
            else:
                cause_text = "its decision's record was not found"
        head, rest = _change_words(changes, before is None)
        parts = [f"{clock(time_ms)} {head}: {cause_text}", *rest]
        if rule:
            parts.append(rule_words(rule))
        steps.append(PartitionStep(
            offset, time_ms, changes, None if cause is None else cause.decision, trigger, rule,
            cause_text, "; ".join(parts),
        ))  # fmt: skip
        before = value
    return steps
