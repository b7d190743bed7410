"""Why a record is poison, in the Python source's own words.

spark-avro says only that a body does not decode. The reason a view records
(``skipped.last_error``) is the codecs' message, so the rows Spark rejects, and
only those, go through the Python source's :class:`RecordDecoder`: the same
text, for the same records. A record Spark rejects but the codecs read is a
disagreement between the two decoders, and fails the batch rather than leave a
record out of the views that the Python source would keep.
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)
from pyspark.sql.pandas.functions import pandas_udf

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


def _reasons(topic: pd.Series, offset: pd.Series, bad: pd.Series, key: pd.Series,
             value: pd.Series) -> pd.Series:  # fmt: skip
    found: list[str | None] = [None] * len(bad)
    for i in bad.index[bad.fillna(False).astype(bool)]:
        raw_value = value.iat[i]
        found[i] = reason(str(topic.iat[i]), int(offset.iat[i]), key.iat[i],
                          None if pd.isna(raw_value) else raw_value)  # fmt: skip
    return pd.Series(found, dtype=object)


def poison_reason(topic: Column, offset: Column, bad: Column, key: Column, value: Column) -> Column:
    """The codecs' reason for each ``bad`` row (null elsewhere); only bad rows carry bytes."""
    udf = pandas_udf(_reasons, "string")  # type: ignore[call-overload]
    reasons: Column = udf(topic, offset, bad, F.when(bad, key), F.when(bad, value))
    return reasons
