"""The undo log itself, and the copy of a classic group it keeps."""

from __future__ import annotations

import dataclasses

import pytest

from kafkacoord.codecs.models.base import is_value_class
from kafkacoord.coordinator.groups.state import GroupState
from kafkacoord.coordinator.groups.undo import UndoLog

from .groupdriver import Driver

G = "g"


def test_the_undo_log_undoes_newest_first_and_only_inside_a_scope() -> None:
    undo = UndoLog()
    mapping = {"kept": 1, "changed": 2, "gone": 3}
    undo.set(mapping, "outside", 0)  # no scope open: nothing to undo
    undo.begin()
    undo.set(mapping, "changed", 20)
    undo.set(mapping, "changed", 200)
    undo.set(mapping, "new", 4)
    assert undo.pop(mapping, "gone") == 3
    assert undo.pop(mapping, "never there") is None
    calls: list[str] = []
    undo.add(lambda: calls.append("added"))
    undo.rollback()
    assert mapping == {"kept": 1, "changed": 2, "gone": 3, "outside": 0}
    assert calls == ["added"]
    assert not undo.open


def test_the_undo_log_forgets_a_committed_scope_and_refuses_nesting() -> None:
    undo = UndoLog()
    mapping: dict[str, int] = {}
    undo.begin()
    undo.set(mapping, "a", 1)
    with pytest.raises(RuntimeError):
        undo.begin()
    undo.commit()
    undo.begin()
    undo.rollback()  # nothing of the committed scope is undone
    assert mapping == {"a": 1}


def test_a_saved_group_shares_nothing_mutable() -> None:
    """ClassicGroup.save copies the containers and members; anything else it shares must
    be immutable, or a failed handler's change to it would survive the undo."""
    d = Driver()
    d.form_group(G, 3)
    group = d.shard.group(G)
    assert group is not None
    group.pending_sync.add("x")  # every container non-empty
    group.pending_members["p"] = None
    saved = group.save()
    immutable = (str, int, bool, tuple, frozenset, type(None), GroupState)
    for name, value in vars(group).items():
        kept = vars(saved)[name]
        frozen = dataclasses.is_dataclass(value) and (
            type(value).__dataclass_params__.frozen or is_value_class(type(value))
        )
        if isinstance(value, immutable) or frozen:
            assert kept == value, name
        else:
            assert kept is not value and (kept == value or name == "members"), name
    for member_id, member in group.members.items():
        assert saved.members[member_id] is not member
