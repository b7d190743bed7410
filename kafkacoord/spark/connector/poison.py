"""Why a record is poison, in the Python source's own words.

spark-avro says only that a body does not decode. The reason a view records
(``skipped.last_error``) is the codecs' message, so the rows Spark rejects, and
only those, go through the Python source's :class:`RecordDecoder` in the fence
stage: the same text, for the same records. A record Spark rejects but the
codecs read is a disagreement between the two decoders, and fails the batch
rather than leave a record out of the views that the Python source would keep.
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]

from ..source.decode import PoisonError, RecordDecoder
from ..source.options import Role

_decoders: dict[Role, RecordDecoder] = {}


class DecoderMismatchError(RuntimeError):
    """spark-avro rejected a record that the codecs decode."""


def reason(topic: str, offset: int, key: bytes | None, value: bytes | None) -> str:
    role = Role.of(topic)
    decoder = _decoders.get(role)
    if decoder is None:
        decoder = _decoders[role] = RecordDecoder(role.allowed)
    try:
        rtype, _ = decoder.key(key)
        if value is not None:
            decoder.value(rtype, value)
    except PoisonError as bad:
        return bad.reason
    raise DecoderMismatchError(
        f"{topic}@{offset}: spark-avro rejects a record the codecs decode (a non-canonical "
        "Avro encoding?); read these topics with the Python source"
    )


def reasons(rows: pd.DataFrame) -> pd.Series:
    """The codecs' reason for each ``bad`` row of the fence stage's ``rows`` (null elsewhere)."""
    found: list[str | None] = [None] * len(rows)
    bad = rows["bad"].fillna(False).to_numpy(dtype=bool)
    if bad.any():
        topics, offsets = rows["topic"].to_numpy(), rows["offset"].to_numpy()
        keys, values = rows["key"].to_numpy(), rows["value"].to_numpy()
        for i in bad.nonzero()[0]:
            raw_value = values[i]
            found[i] = reason(str(topics[i]), int(offsets[i]), keys[i],
                              None if pd.isna(raw_value) else raw_value)  # fmt: skip
    return pd.Series(found, dtype=object, index=rows.index)
