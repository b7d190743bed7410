"""value_class: a plain slotted dataclass at run time that compares, hashes and copies as
the frozen dataclass it stands for."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

from kafkacoord.codecs.models.base import is_value_class, value_class
from kafkacoord.codecs.models.offsets import OffsetCommitKey, OffsetCommitValue
from kafkacoord.coordinator.runtime.shard import Record, Reply, Request, RequestRef
from kafkacoord.storage.cache import Change


@value_class
class Fast:
    a: int
    b: str = "x"
    note: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Frozen:
    a: int
    b: str = "x"
    note: int = field(default=0, compare=False)


def test_compares_and_hashes_as_the_frozen_dataclass() -> None:
    for a, b, note in [(1, "x", 0), (1, "x", 9), (2, "y", 0), (-5, "", 3)]:
        fast, frozen = Fast(a, b, note), Frozen(a, b, note)
        assert hash(fast) == hash(frozen)
        assert fast == Fast(a, b, note + 1)  # not compared
        assert fast != Fast(a + 1, b, note)
    assert len({Fast(1), Fast(1, note=5), Fast(2)}) == 2


def test_builds_as_the_frozen_dataclass() -> None:
    assert Fast(1) == Fast(a=1, b="x")
    assert dataclasses.replace(Fast(1, "q", 4), a=2) == Fast(2, "q")
    assert [f.name for f in dataclasses.fields(Fast)] == ["a", "b", "note"]
    assert Fast.__slots__ == ("a", "b", "note")
    assert repr(Fast(1)).endswith("Fast(a=1, b='x', note=0)")


def test_copies_and_pickles() -> None:
    value = Fast(3, "z", 1)
    for copied in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert copied == value and copied.note == 1 and copied is not value


def test_the_hot_path_values_are_value_classes() -> None:
    for cls in (OffsetCommitKey, OffsetCommitValue, Record, Request, RequestRef, Reply, Change):
        assert is_value_class(cls), cls
    assert not is_value_class(Frozen)

    class Sub(Fast):  # not made by value_class: nothing says it is immutable
        pass

    assert not is_value_class(Sub)
