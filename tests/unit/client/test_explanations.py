"""The words explain partition prints, for every trigger and election rule."""

from __future__ import annotations

import pytest

from kafkacoord.client.explanations import explain_partition, rule_words, trigger_words
from kafkacoord.client.metadata_history import HistoryUnavailableError, Window
from kafkacoord.codecs.models import (
    Cause,
    DecisionKey,
    DecisionValue,
    PartitionState,
    PartitionValue,
    Trigger,
    TriggerKind,
)
from kafkacoord.coordinator.controller.partition_change import NO_CANDIDATE, Election
from kafkacoord.storage.log_history import LogRead

T0 = 1_795_000_000_000  # 2026-11-18T11:06:40Z
K = TriggerKind


def value(
    leader: int, epoch: int, isr: tuple[int, ...], cause: Cause | None, **kw: object
) -> PartitionValue:
    return PartitionValue("orders", 0, PartitionState.ONLINE, (3, 1, 2), isr, leader, epoch,
                          epoch, T0, 1, cause=cause, **kw)  # type: ignore[arg-type]  # fmt: skip


def kinds() -> list[str]:
    return [v for k, v in vars(TriggerKind).items() if not k.startswith("_")]


@pytest.mark.parametrize("kind", kinds())
def test_every_trigger_kind_has_its_own_words(kind: str) -> None:
    words = trigger_words(Trigger(kind, node_id=3))
    assert words and words != kind.replace("_", " "), words


def test_trigger_details() -> None:
    expired = Trigger(K.SESSION_EXPIRED, node_id=3, heartbeat_ms=T0 - 9000)
    assert trigger_words(expired) == "node 3's session expired (last heartbeat 11:06:31)"
    admin = Trigger(K.ADMIN_REQUEST, principal="User:ops", request_id="cli:7", api="ElectLeaders")
    assert trigger_words(admin) == "ElectLeaders by User:ops, request cli:7"
    assert "an unauthenticated client" in trigger_words(Trigger(K.ADMIN_REQUEST, api="FenceNode"))
    assert trigger_words(Trigger(K.REBALANCE_PLAN, plan_id="p-1", plan_step=4)) == (
        "step 4 of rebalance plan p-1")  # fmt: skip
    assert trigger_words(Trigger(K.LEADER_REBALANCE, imbalance=0.25)) == (
        "auto leader rebalance (imbalance 0.25)")  # fmt: skip
    assert trigger_words(Trigger(K.ISR_CHANGE, node_id=2, api="AlterPartition")) == (
        "an ISR change reported by node 2 (AlterPartition)")  # fmt: skip
    assert trigger_words(Trigger("a_future_kind")) == "a future kind"


@pytest.mark.parametrize(
    "rule", [v for k, v in vars(Election).items() if not k.startswith("_")] + [NO_CANDIDATE]
)
def test_every_election_rule_has_words(rule: str) -> None:
    assert not rule_words(rule).startswith("rule ")


def test_a_partitions_history_in_words_and_data() -> None:
    created, fenced = DecisionKey(1, 1), DecisionKey(1, 2)
    decisions = {
        created: DecisionValue(Trigger(K.TOPIC_CREATED), T0, 1),
        fenced: DecisionValue(
            Trigger(K.SESSION_EXPIRED, node_id=3, heartbeat_ms=T0 + 2000), T0 + 11_000, 1
        ),
    }
    records = [
        (5, T0, value(3, 0, (3, 1, 2), Cause(created, Election.INITIAL))),
        (9, T0 + 11_000, value(1, 1, (1, 2), Cause(fenced, Election.OFFLINE))),
        (12, T0 + 20_000, value(1, 1, (1, 2, 3), None)),  # before causes
        (15, T0 + 30_000, value(2, 2, (2,), Cause(DecisionKey(1, 0), "preferred"))),
        (20, T0 + 40_000, None),
    ]
    steps = explain_partition(records, decisions, expired_before=created)
    texts = [s.text for s in steps]
    assert texts[0] == ("11:06:40 created on replicas [3,1,2], leader 3: the topic was created; "
                        "the first live replica at creation")  # fmt: skip
    assert texts[1] == (
        "11:06:51 leader 3 → 1, epoch 0 → 1: node 3's session expired "
        "(last heartbeat 11:06:42); ISR [3,1,2] → [1,2]; chosen from the ISR"
    )
    assert texts[2] == "11:07:00 ISR [1,2] → [1,2,3]: cause not recorded (written before causes)"
    assert "expired (decision_retention_ms)" in texts[3]
    assert texts[4] == "11:07:20 deleted (its topic was deleted)"
    data = steps[1].as_dict()
    assert data["changes"] == {"leader": [3, 1], "leader_epoch": [0, 1], "isr": [[3, 1, 2], [1, 2]],
                               "partition_epoch": [0, 1]}  # fmt: skip
    assert data["trigger"]["kind"] == "session_expired" and data["trigger"]["node_id"] == 3
    assert data["decision"] == {"controller_epoch": 1, "sequence": 2} and data["rule"] == "offline"


def test_the_window_says_where_history_ends() -> None:
    window, now = Window(60_000, reported=True), T0
    whole = LogRead([], T0 - 600_000, 10, first_offset=0)
    window.check(now - 60_000, now, whole)  # inside the window
    window.check(now - 700_000, now, whole)  # before offset 0's record: nothing existed
    with pytest.raises(HistoryUnavailableError, match=r"exact from .*the last 1 min.*--warehouse"):
        window.check(now - 300_000, now, whole)
    compacted = LogRead([], T0 - 600_000, 10, first_offset=4)
    with pytest.raises(HistoryUnavailableError, match="as configured"):
        Window(60_000, reported=False).check(now - 700_000, now, compacted)
