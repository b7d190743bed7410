from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkacoord.coordinator.runtime.timers import Timers


def test_due_keys_pop_in_deadline_order() -> None:
    timers = Timers()
    timers.schedule("b", 20)
    timers.schedule("a", 10)
    timers.schedule("c", 30)
    assert timers.next_deadline() == 10
    assert timers.pop_due(25) == ["a", "b"]
    assert timers.pop_due(25) == []
    assert timers.next_deadline() == 30
    assert len(timers) == 1


def test_reschedule_replaces_and_cancel_removes() -> None:
    timers = Timers()
    timers.schedule("hb", 10)
    timers.schedule("hb", 50)
    assert timers.pop_due(20) == []
    assert timers.deadline("hb") == 50
    timers.cancel("hb")
    assert "hb" not in timers
    assert timers.next_deadline() is None
    assert timers.pop_due(100) == []


def test_keys_need_not_be_orderable() -> None:
    timers = Timers()
    timers.schedule(("g", 1), 5)
    timers.schedule(frozenset({1}), 5)
    assert set(map(str, timers.pop_due(5))) == {str(("g", 1)), str(frozenset({1}))}


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 1000), st.booleans()), max_size=60))
def test_matches_a_dict_model(ops: list[tuple[int, int, bool]]) -> None:
    timers = Timers()
    model: dict[int, int] = {}
    for key, deadline, cancel in ops:
        if cancel:
            timers.cancel(key)
            model.pop(key, None)
        else:
            timers.schedule(key, deadline)
            model[key] = deadline
    assert timers.next_deadline() == (min(model.values()) if model else None)
    due = timers.pop_due(500)
    assert sorted(due) == sorted(k for k, d in model.items() if d <= 500)  # type: ignore[type-var]
    assert [model[k] for k in due] == sorted(model[k] for k in due)  # type: ignore[index]
