"""The nemesis checker on minimal histories: each anomaly, and the near miss that is not one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.nemesis.checker import ANOMALY_KINDS, Anomaly, check
from tests.nemesis.history import (
    Entry,
    Fault,
    HistoryWriter,
    Observation,
    Op,
    Outcome,
    read_history,
    to_json,
)
from tests.nemesis.timeline import plot

MS = 1_000_000
KEY = "g/t/0"


def commit(value: int, t0: int, t1: int, outcome: Outcome = "ok", key: str = KEY) -> Op:
    return Op("w", "commit", key, value, outcome, t0 * MS, t1 * MS)


def fetch(value: int | None, t0: int, t1: int, process: str = "r", key: str = KEY) -> Op:
    return Op(process, "fetch", key, value, "ok", t0 * MS, t1 * MS)


def final(value: int | None, t0: int = 10_000, key: str = KEY) -> Observation:
    return Observation("final", "checker", t0 * MS, key=key, value=value)


def role(process: str, epoch: int, t0: int, name: str = "leader") -> Observation:
    return Observation("role", process, t0 * MS, key="t/3", role=name, leader_epoch=epoch)


def assignment(process: str, t0: int, partitions: list[str], **numbers: Any) -> Observation:
    return Observation("assignment", process, t0 * MS, key="g", partitions=partitions, **numbers)


def of_kind(entries: list[Entry], kind: str) -> list[Anomaly]:
    return [a for a in check(entries).anomalies if a.kind == kind]


def test_clean_history_has_no_anomalies() -> None:
    entries: list[Entry] = [
        commit(1, 0, 10),
        fetch(None, 1, 5),  # began before the commit completed: may see nothing
        fetch(1, 20, 30),
        commit(2, 40, 50, "unknown"),
        fetch(2, 45, 60),  # the unknown commit landed
        commit(3, 70, 80, "fail"),
        fetch(2, 90, 95),
        Op("r", "fetch", KEY, None, "fail", 96 * MS, 97 * MS),
        final(2),
        role("n1", 1, 0),
        role("n2", 1, 5, "follower"),
        role("n2", 2, 20),
        role("n1", 2, 21, "follower"),
        Observation("epoch", "obs", 0, epoch=3),
        Observation("epoch", "obs", 5 * MS, epoch=4),
        assignment("c1", 0, ["t/0", "t/1"], generation=1),
        assignment("c1", 30, ["t/0"], generation=2),
        assignment("c2", 30, ["t/1"], generation=2),
    ]
    result = check(entries)
    assert result.anomalies == []
    assert result.valid
    assert result.counts() == dict.fromkeys(ANOMALY_KINDS, 0)
    assert (result.ops_ok, result.ops_failed, result.ops_unknown) == (5, 2, 1)


def test_empty_history() -> None:
    result = check([])
    assert result.counts() == dict.fromkeys(ANOMALY_KINDS, 0)
    assert (result.ops_ok, result.ops_failed, result.ops_unknown) == (0, 0, 0)


def test_counts_name_every_kind() -> None:
    result = check([commit(3, 0, 10), commit(5, 20, 30), final(3)])
    counts = result.counts()
    assert set(counts) == set(ANOMALY_KINDS)
    assert counts["lost_write"] == 1
    assert sum(counts.values()) == 1


def test_acked_commit_above_final_is_lost() -> None:
    entries: list[Entry] = [commit(v, 10 * v, 10 * v + 5) for v in range(1, 6)]
    entries.append(final(3))
    (lost,) = of_kind(entries, "lost_write")
    assert lost.key == KEY
    assert [e.value for e in lost.entries] == [4, 5]
    assert "largest 5" in lost.message
    assert "returned 3" in lost.message


def test_lost_writes_list_at_most_ten_ops() -> None:
    entries: list[Entry] = [commit(v, v, v + 1) for v in range(1, 31)]
    entries.append(final(None))
    (lost,) = of_kind(entries, "lost_write")
    assert [e.value for e in lost.entries] == list(range(21, 31))
    assert lost.message.startswith("30 acknowledged")


def test_acked_commits_without_final_read_are_lost() -> None:
    (lost,) = of_kind([commit(1, 0, 10)], "lost_write")
    assert "no final read" in lost.message


def test_final_covering_acked_commits_and_unknown_ones_is_not_lost() -> None:
    entries: list[Entry] = [commit(1, 0, 10), commit(2, 20, 30), commit(3, 40, 50, "unknown")]
    assert of_kind([*entries, final(2)], "lost_write") == []
    # A final that read nothing while only unknown or refused commits exist loses nothing.
    assert (
        of_kind([commit(1, 0, 10, "unknown"), commit(2, 20, 30, "fail"), final(None)], "lost_write")
        == []
    )


def test_fetch_after_ack_returning_older_value_is_stale() -> None:
    entries: list[Entry] = [commit(1, 0, 10), commit(2, 100, 120), fetch(1, 200, 210, "c2-1")]
    (stale,) = of_kind(entries, "stale_read")
    assert stale.message == ("fetch by c2-1 at 0.200s returned 1 but 2 was acknowledged at 0.120s")
    assert stale.entries == [entries[1], entries[2]]


def test_fetch_of_nothing_after_ack_is_stale() -> None:
    (stale,) = of_kind([commit(1, 0, 10), fetch(None, 20, 30)], "stale_read")
    assert "returned nothing" in stale.message


def test_fetch_overlapping_the_commit_is_not_stale() -> None:
    entries: list[Entry] = [commit(1, 0, 10), commit(2, 100, 120), fetch(1, 110, 130)]
    assert of_kind(entries, "stale_read") == []


def test_reads_going_backwards_in_real_time_are_stale() -> None:
    # The commit is unknown, so only the two reads contradict each other.
    entries: list[Entry] = [
        commit(1, 0, 10),
        commit(2, 20, 1000, "unknown"),
        fetch(2, 30, 40, "a"),
        fetch(1, 50, 60, "b"),
    ]
    (stale,) = of_kind(entries, "stale_read")
    assert stale.entries == [entries[2], entries[3]]
    assert "after fetch by a returned 2" in stale.message


def test_concurrent_reads_may_disagree() -> None:
    entries: list[Entry] = [
        commit(1, 0, 10),
        commit(2, 20, 1000, "unknown"),
        fetch(2, 30, 60, "a"),
        fetch(1, 50, 70, "b"),
    ]
    assert of_kind(entries, "stale_read") == []


def test_final_below_a_fetch_is_stale() -> None:
    entries: list[Entry] = [commit(1, 0, 10), commit(2, 20, 30, "unknown"), fetch(2, 40, 50)]
    (stale,) = of_kind([*entries, final(1)], "stale_read")
    assert "final read" in stale.message
    assert of_kind([*entries, final(2)], "stale_read") == []


def test_value_never_committed_is_phantom() -> None:
    (phantom,) = of_kind([commit(1, 0, 10), fetch(7, 20, 30)], "phantom_read")
    assert "7" in phantom.message
    assert "never committed" in phantom.message


def test_value_of_an_unknown_commit_is_not_phantom() -> None:
    entries: list[Entry] = [commit(1, 0, 10, "unknown"), fetch(1, 5, 30), final(1)]
    assert of_kind(entries, "phantom_read") == []


def test_value_read_before_its_commit_was_invoked_is_phantom() -> None:
    (phantom,) = of_kind([fetch(1, 0, 10), commit(1, 20, 30)], "phantom_read")
    assert "before its commit was invoked" in phantom.message


def test_value_of_a_refused_commit_is_phantom() -> None:
    entries: list[Entry] = [commit(1, 0, 10, "fail"), final(1)]
    (phantom,) = of_kind(entries, "phantom_read")
    assert "refused" in phantom.message
    assert phantom.entries[0] is entries[0]


def test_two_processes_leading_one_epoch() -> None:
    entries: list[Entry] = [role("n1", 4, 0), role("n2", 4, 10), role("n1", 4, 20)]
    (two,) = of_kind(entries, "two_leaders")
    assert two.key == "t/3"
    assert two.entries == [entries[0], entries[1]]
    assert "epoch 4" in two.message


def test_one_process_restating_its_leadership_is_not_two_leaders() -> None:
    entries: list[Entry] = [role("n1", 4, 0), role("n1", 4, 10), role("n2", 5, 20)]
    assert of_kind(entries, "two_leaders") == []
    # A follower at the leader's epoch is not a second leader; nor is an unknown epoch.
    entries = [
        role("n1", 4, 0),
        role("n2", 4, 10, "follower"),
        role("n1", -1, 0),
        role("n2", -1, 1),
    ]
    assert of_kind(entries, "two_leaders") == []


def test_leader_epoch_going_back_for_one_observer() -> None:
    entries: list[Entry] = [role("n1", 5, 0), role("n1", 3, 10, "follower"), role("n1", -1, 20)]
    (regression,) = of_kind(entries, "epoch_regression")
    assert "from 5" in regression.message and "to 3" in regression.message
    assert regression.entries == [entries[0], entries[1]]


def test_epochs_of_different_observers_do_not_compare() -> None:
    entries: list[Entry] = [role("n1", 5, 0), role("n2", 3, 10), role("n1", -1, 20)]
    assert of_kind(entries, "epoch_regression") == []


def test_controller_epoch_and_generation_going_back() -> None:
    entries: list[Entry] = [
        Observation("epoch", "obs", 0, epoch=7),
        Observation("epoch", "obs", 10 * MS, epoch=6),
        assignment("c1", 0, [], generation=3),
        assignment("c1", 10, [], generation=2),
        assignment("c2", 0, [], epoch=9),
        assignment("c2", 10, [], epoch=9),
    ]
    regressions = of_kind(entries, "epoch_regression")
    assert [(a.entries[0].process, a.key) for a in regressions] == [("obs", ""), ("c1", "g")]


def test_two_members_owning_a_partition_in_one_generation() -> None:
    entries: list[Entry] = [
        assignment("c1", 0, ["t/0", "t/1"], generation=2),
        assignment("c2", 5, ["t/1", "t/2"], generation=2),
        assignment("c2", 6, ["t/1", "t/2"], generation=2),  # restated: reported once
    ]
    (double,) = of_kind(entries, "double_ownership")
    assert double.key == "g"
    assert double.entries == [entries[0], entries[1]]
    assert "generation 2" in double.message and "t/1" in double.message
    assert "t/0" not in double.message


def test_member_epochs_overlapping() -> None:
    entries: list[Entry] = [
        assignment("c1", 0, ["t/0"], epoch=4),
        assignment("c2", 5, ["t/0"], epoch=4),
    ]
    (double,) = of_kind(entries, "double_ownership")
    assert "member epoch 4" in double.message


def test_partition_moving_between_generations_is_not_double_ownership() -> None:
    entries: list[Entry] = [
        assignment("c1", 0, ["t/0"], generation=2),
        assignment("c2", 5, ["t/0"], generation=3),
        assignment("c3", 6, ["t/0"]),  # neither generation nor epoch: nothing to compare
    ]
    assert of_kind(entries, "double_ownership") == []


def test_anomalies_are_sorted_by_kind_then_key() -> None:
    entries: list[Entry] = [
        commit(5, 0, 10, key="g/b"),
        commit(5, 0, 10, key="g/a"),
        final(None, key="g/a"),
        final(None, key="g/b"),
        role("n1", 1, 0),
        role("n2", 1, 0),
        fetch(9, 20, 30, key="g/a"),
    ]
    kinds_keys = [(a.kind, a.key) for a in check(entries).anomalies]
    assert kinds_keys == [
        ("lost_write", "g/a"),
        ("lost_write", "g/b"),
        ("stale_read", "g/a"),  # the final read nothing after a fetch read 9
        ("phantom_read", "g/a"),
        ("two_leaders", "t/3"),
    ]
    assert check(list(reversed(entries))).anomalies == check(entries).anomalies


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "w1.jsonl"
    writer = HistoryWriter(path)
    writer.write(commit(1, 0, 10))
    writer.write(final(1))
    writer.close()
    torn = to_json(commit(2, 20, 30))
    with path.open("a", encoding="utf-8") as f:
        f.write(torn[: len(torn) // 2])
    entries = read_history([path])
    assert entries == [commit(1, 0, 10), final(1)]


def test_timeline_writes_a_png(tmp_path: Path) -> None:
    entries: list[Entry] = [
        commit(1, 0, 10),
        commit(2, 20, 500, "unknown"),
        commit(3, 600, 610, "fail"),
        fetch(1, 5, 5),
        role("n1", 1, 50),
        final(1, 700),
    ]
    faults = [Fault("partition", "n1", 100 * MS, 300 * MS), Fault("kill", "n2", 400 * MS, 450 * MS)]
    path = tmp_path / "out" / "timeline.png"
    plot(entries, faults, path, "campaign")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 1000


def test_timeline_of_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.png"
    plot([], [], path, "empty")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
