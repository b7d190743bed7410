"""KIP-211 expiry, and the views' vectorised form of it."""

from __future__ import annotations

import pandas as pd

from kafkacoord.spark.expiry import expires_at, is_expired
from kafkacoord.spark.views.base import Context
from kafkacoord.spark.views.offsets import expiry_ms

RETENTION = 1_000


def test_rules() -> None:
    common = {"retention_ms": RETENTION, "group_state_timestamp_ms": 500}
    # Explicit expiry (old clients) wins; -1 means none.
    assert expires_at(100, 50, group_exists=True, group_members=3, **common) == 50
    assert expires_at(100, -1, group_exists=False, group_members=0, **common) == 1_100
    # Standalone consumer: from the last commit.
    assert expires_at(100, None, group_exists=False, group_members=0, **common) == 1_100
    # A group with members: never.
    assert expires_at(100, None, group_exists=True, group_members=2, **common) is None
    # An empty group: from when it became empty.
    assert expires_at(100, None, group_exists=True, group_members=0, **common) == 1_500
    assert not is_expired(None, 10**12)
    assert is_expired(1_500, 1_500)
    assert not is_expired(1_500, 1_499)


def test_vectorised_expiry_matches_the_rules() -> None:
    offsets = pd.DataFrame(
        {
            "group": ["members", "empty", "nogroup", "explicit", "empty_no_ts"],
            "commit_timestamp_ms": [100, 100, 100, 100, 300],
            "expire_timestamp_ms": [None, None, -1, 42, None],
        }
    )
    groups = pd.DataFrame(
        {
            "group": ["members", "empty", "explicit", "empty_no_ts"],
            "members": [[{"m": 1}], [], [{"m": 1}], []],
            "state_timestamp_ms": [700, 500, 0, -1],
        }
    )
    got = expiry_ms(offsets, groups, Context(now_ms=0, retention_ms=RETENTION)).tolist()
    expected = []
    for row in offsets.itertuples():
        match = groups[groups["group"] == row.group]
        explicit = None if pd.isna(row.expire_timestamp_ms) else int(row.expire_timestamp_ms)
        expected.append(
            expires_at(
                row.commit_timestamp_ms,
                explicit,
                group_exists=not match.empty,
                group_members=len(match["members"].iloc[0]) if not match.empty else 0,
                group_state_timestamp_ms=(
                    int(match["state_timestamp_ms"].iloc[0]) if not match.empty else None
                ),
                retention_ms=RETENTION,
            )
        )
    assert [None if pd.isna(v) else int(v) for v in got] == expected
    assert expected == [None, 1_500, 1_100, 42, 1_300]
