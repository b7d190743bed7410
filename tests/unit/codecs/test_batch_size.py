"""The batch size the runtime plans with is never less than the batch it then writes."""

from __future__ import annotations

from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacoord.codecs.batch_size import BATCH_OVERHEAD_BYTES, batch_bytes, record_bytes
from kafkacoord.codecs.fencing import epoch_headers
from kafkacoord.storage.produce_wire import Header, ProducerIdentity, record_batch

IDENTITY = ProducerIdentity(2**62, 2**15 - 1)
EPOCH_HEADERS = cast(list[Header], epoch_headers(2**31 - 1))

raw_records = st.lists(
    st.tuples(st.binary(max_size=3_000), st.none() | st.binary(max_size=20_000)),
    min_size=1,
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(records=raw_records, timestamp_ms=st.integers(0, 2**41))
def test_a_written_batch_is_no_larger_than_planned(
    records: list[tuple[bytes, bytes | None]], timestamp_ms: int
) -> None:
    written = record_batch(IDENTITY, 2**31 - 1, records, EPOCH_HEADERS, timestamp_ms)
    assert len(written) <= batch_bytes(records)


def test_the_plan_counts_each_record_and_the_batch_header() -> None:
    records = [(b"k" * 10, b"v" * 100), (b"key", None)]
    assert batch_bytes(records) == BATCH_OVERHEAD_BYTES + record_bytes(records[0]) + record_bytes(
        records[1]
    )
    # Close as well as safe: a large record's plan is within 128 bytes of its batch.
    written = record_batch(IDENTITY, 0, [(b"k", b"v" * 1_000_000)], EPOCH_HEADERS, 0)
    assert batch_bytes([(b"k", b"v" * 1_000_000)]) - len(written) < 128
