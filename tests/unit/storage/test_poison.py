"""kafkacoord.storage.poison: process-wide counts, log lines, strict mode."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from kafkacoord.storage import poison
from kafkacoord.storage.errors import PoisonRecordError, StorageError
from kafkacoord.storage.fold import ChunkFolder, offsets_policy
from tests.unit.messages import FakeMessage


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    poison.reset_poison_counts()
    poison.set_strict(False)
    structlog.reset_defaults()
    yield
    poison.reset_poison_counts()
    poison.set_strict(False)


def test_counts_per_topic_and_logs_the_position() -> None:
    with capture_logs() as logs:
        poison.record_poison("a", 0, 7, "key: unknown record type tag 99")
        poison.record_poison("a", 3, 9, "value: unsupported value version 99 for NODE")
        poison.record_poison("b", 1, 0, "record has no key")
    assert poison.poison_counts() == {"a": 2, "b": 1}
    assert [(e["event"], e["topic"], e["partition"], e["offset"]) for e in logs] == [
        ("skipped poison record", "a", 0, 7),
        ("skipped poison record", "a", 3, 9),
        ("skipped poison record", "b", 1, 0),
    ]
    assert logs[1]["reason"] == "value: unsupported value version 99 for NODE"
    assert logs[1]["log_level"] == "warning"
    assert logs[1]["skipped"] == 2


def test_counts_are_a_copy() -> None:
    poison.record_poison("a", 0, 1, "r")
    poison.poison_counts()["a"] = 100
    assert poison.poison_counts() == {"a": 1}


def test_counting_is_thread_safe() -> None:
    def work() -> None:
        for offset in range(2000):
            poison.record_poison("t", 0, offset, "r")

    with capture_logs():
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert poison.poison_counts() == {"t": 16_000}


def test_strict_mode_raises_names_the_record_and_counts_nothing() -> None:
    poison.set_strict(True)
    assert poison.is_strict()
    with capture_logs() as logs, pytest.raises(PoisonRecordError) as info:
        poison.record_poison("__kc_offsets", 4, 1234, "value: Avro body does not match")
    error = info.value
    assert isinstance(error, StorageError)
    assert (error.topic, error.partition, error.offset) == ("__kc_offsets", 4, 1234)
    assert "__kc_offsets-4@1234" in str(error)
    assert "value: Avro body does not match" in str(error)
    assert poison.poison_counts() == {}
    assert logs == []


def test_strict_listeners_hear_each_failure_until_removed() -> None:
    heard: list[PoisonRecordError] = []
    poison.add_strict_listener(heard.append)
    try:
        with pytest.raises(PoisonRecordError):
            poison.record_poison("m", 0, 5, "r", strict=True)
        assert [(e.topic, e.offset) for e in heard] == [("m", 5)]
    finally:
        poison.remove_strict_listener(heard.append)
    with pytest.raises(PoisonRecordError):
        poison.record_poison("m", 0, 6, "r", strict=True)
    assert len(heard) == 1
    poison.remove_strict_listener(heard.append)  # removing twice is harmless


def test_explicit_strict_overrides_the_process_switch() -> None:
    poison.set_strict(True)
    with capture_logs():
        poison.record_poison("a", 0, 1, "r", strict=False)
    assert poison.poison_counts() == {"a": 1}
    poison.set_strict(False)
    with pytest.raises(PoisonRecordError):
        poison.record_poison("a", 0, 2, "r", strict=True)


def test_folds_report_through_this_module_and_follow_the_process_switch() -> None:
    messages = [FakeMessage(b"\x63\x01x", b"\x00\x01", 17)]
    with capture_logs() as logs:
        _, stats = ChunkFolder("offs", offsets_policy(1000)).fold(2, messages)  # type: ignore[arg-type]
    assert stats.poison == 1
    assert poison.poison_counts() == {"offs": 1}
    assert (logs[0]["topic"], logs[0]["partition"], logs[0]["offset"]) == ("offs", 2, 17)

    poison.set_strict(True)
    folder = ChunkFolder("offs", offsets_policy(1000))
    assert folder.strict
    with pytest.raises(PoisonRecordError, match="offs-2@17"):
        folder.fold(2, messages)  # type: ignore[arg-type]
