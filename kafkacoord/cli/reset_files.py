"""kafka-consumer-groups' reset-offsets CSV (``--export``, ``--from-file``).

One group: ``topic,partition,offset`` per line. Several groups (or ``--all-groups``):
``group,topic,partition,offset``. No header, as Kafka's CsvUtils writes it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

TP = tuple[str, int]
GroupPlans = dict[str, dict[TP, int]]


class ResetFileError(ValueError):
    """A reset plan file is not in kafka-consumer-groups' CSV format."""


def format_reset_plans(plans: Mapping[str, Mapping[TP, int]], *, with_group: bool) -> str:
    """The plans as Kafka's ``--export`` writes them, sorted by group, topic and partition."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group in sorted(plans):
        for (topic, partition), offset in sorted(plans[group].items()):
            row = (topic, partition, offset)
            writer.writerow((group, *row) if with_group else row)
    return out.getvalue()


def parse_reset_plans(text: str, single_group: str | None) -> GroupPlans:
    """The plans of a reset file. As Kafka reads it: with exactly one ``--group``
    (``single_group``) a file whose first line has three fields is that group's;
    otherwise every line names its group. A partition listed twice keeps its last line."""
    rows = [
        (number, fields)
        for number, fields in enumerate(csv.reader(io.StringIO(text)), start=1)
        if fields and any(f.strip() for f in fields)
    ]
    if not rows:
        raise ResetFileError("the reset plan file has no lines")
    three = single_group is not None and len(rows[0][1]) == 3
    plans: GroupPlans = {}
    for number, fields in rows:
        expected = 3 if three else 4
        if len(fields) != expected:
            shape = "topic,partition,offset" if three else "group,topic,partition,offset"
            raise ResetFileError(
                f"line {number}: expected {shape}, got {len(fields)} fields: {','.join(fields)}"
            )
        group = single_group if three else fields[0]
        topic, partition, offset = fields[-3:]
        assert group is not None
        tp = (topic, _integer(partition, "partition", number))
        plans.setdefault(group, {})[tp] = _integer(offset, "offset", number)
    return plans


def _integer(text: str, what: str, line: int) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ResetFileError(f"line {line}: {what} must be an integer, got {text!r}") from None
