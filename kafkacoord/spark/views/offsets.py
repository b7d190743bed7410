"""``group_offsets`` (``kafka-consumer-groups --describe``), ``lag_status`` (Burrow) and
``lag_history`` (lag over time)."""

from __future__ import annotations

from typing import Final

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from ..burrow import (
    Commit,
    Rules,
    Status,
    complete,
    evaluate,
    group_complete,
    group_status,
    lag_at,
    thin,
    worst,
)
from ..lag_history import LAG_SAMPLES
from ..tables import END_OFFSETS
from .base import Context, Snapshot, ms_to_time, to_table
from .groups import consumer_subscriptions, owners

TS: Final = pa.timestamp("ms", tz="UTC")

GROUP_OFFSETS: Final = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("current_offset", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("lag", pa.int64()),
        ("consumer_id", pa.string()),
        ("host", pa.string()),
        ("client_id", pa.string()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", TS),
        ("expire_timestamp", TS),
        ("coordinator_shard", pa.int32()),
    ]
)

LOG_END_OFFSETS: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("log_end_offset", pa.int64()),
        ("sampled_at", TS),
    ]
)

LAG_STATUS: Final = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("status", pa.string()),
        ("group_worst", pa.string()),
        ("group_status", pa.string()),
        ("current_offset", pa.int64()),
        ("current_lag", pa.int64()),
        ("window_commits", pa.int32()),
        ("complete", pa.float64()),
        ("group_complete", pa.float64()),
        ("window_start_offset", pa.int64()),
        ("window_end_offset", pa.int64()),
        ("window_start", TS),
        ("window_end", TS),
        ("evaluated_at", TS),
    ]
)


LAG_HISTORY: Final = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time", TS),
        ("committed_offset", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("lag", pa.int64()),
        ("coordinator_shard", pa.int32()),
    ]
)


def expiry_ms(
    offsets: pd.DataFrame,
    groups: pd.DataFrame,
    ctx: Context,
    subscribed: set[tuple[str, str]] | None = None,
) -> pd.Series:
    """``expiry.expires_at`` for every row at once (NaN: cannot expire while members remain).

    ``subscribed`` holds the (group, topic) pairs a KIP-848 group's members subscribe to:
    they never expire; the group's other offsets expire from their commit, as Kafka's."""
    nothing = pd.Series(np.nan, index=offsets.index)
    if groups.empty:
        members, state_ts = nothing, nothing
    else:
        info = groups.drop_duplicates("group", keep="last").set_index("group")
        members = offsets["group"].map(info["members"].map(len)).astype("float64")
        state_ts = offsets["group"].map(info["state_timestamp_ms"]).astype("float64")
    commit = offsets["commit_timestamp_ms"].astype("float64")
    explicit = offsets["expire_timestamp_ms"].astype("float64")
    has_explicit = explicit.notna() & (explicit >= 0)
    # An empty group's offsets expire counting from when it became empty.
    empty_since = state_ts.where(state_ts >= 0, commit)
    grouped = np.where(members > 0, np.nan, empty_since + ctx.retention_ms)
    standalone = commit + ctx.retention_ms
    result = np.where(has_explicit, explicit, np.where(members.notna(), grouped, standalone))
    if subscribed:
        keys = pd.Series(list(zip(offsets["group"], offsets["topic"], strict=True)),
                         index=offsets.index)  # fmt: skip
        kept = keys.isin(subscribed) & ~has_explicit
        result = np.where(kept, np.nan, result)
    return pd.Series(result, index=offsets.index)


_COMMIT_COLUMNS: Final = ("group", "topic", "partition", "offset", "leader_epoch", "metadata",
                           "commit_timestamp_ms", "expire_timestamp_ms", "shard")  # fmt: skip
_GROUP_COLUMNS: Final = ("group", "members", "state_timestamp_ms")


def visible_offsets(snap: Snapshot, ctx: Context, *, windows: bool = False) -> pd.DataFrame:
    """Committed offsets that have not expired, with their expiry and log end offset.

    ``windows`` adds the commit windows and end-offset samples (for Burrow).
    """
    extra = ("window",) if windows else ()
    oc = snap.frame("offset_commits", _COMMIT_COLUMNS + extra)
    if oc.empty:
        return oc
    subscribed = consumer_subscriptions(snap, set(oc["topic"]))
    expiry = expiry_ms(oc, snap.frame("group_metadata", _GROUP_COLUMNS), ctx, subscribed)
    live = oc.assign(expiry_ms=expiry)[~(expiry.notna() & (ctx.now_ms >= expiry))]
    ends = ("topic", "partition", "log_end_offset") + (("history",) if windows else ())
    merged = live.merge(snap.frame(END_OFFSETS, ends), on=["topic", "partition"], how="left")
    merged["log_end_offset"] = merged["log_end_offset"].astype("Int64")
    merged["lag"] = (merged["log_end_offset"] - merged["offset"]).clip(lower=0)
    return merged


def group_offsets(snap: Snapshot, ctx: Context) -> pa.Table:
    live = visible_offsets(snap, ctx)
    if live.empty:
        return GROUP_OFFSETS.empty_table()
    frame = live.merge(owners(snap), on=["group", "topic", "partition"], how="left")
    frame = frame.assign(
        current_offset=frame["offset"],
        commit_timestamp=ms_to_time(frame["commit_timestamp_ms"]),
        expire_timestamp=ms_to_time(frame["expiry_ms"]),
        coordinator_shard=frame["shard"],
    ).sort_values(["group", "topic", "partition"])
    return to_table(frame, GROUP_OFFSETS)


def log_end_offsets(snap: Snapshot, ctx: Context) -> pa.Table:
    ends = snap.frame(END_OFFSETS)
    if ends.empty:
        return LOG_END_OFFSETS.empty_table()
    frame = ends.assign(sampled_at=ms_to_time(ends["sampled_ms"]))
    return to_table(frame.sort_values(["topic", "partition"]), LOG_END_OFFSETS)


def lag_status(snap: Snapshot, ctx: Context) -> pa.Table:
    live = visible_offsets(snap, ctx, windows=True)
    if live.empty:
        return LAG_STATUS.empty_table()
    rules = Rules(allowed_lag=ctx.allowed_lag, intervals=ctx.window)
    rows = []
    for row in live.itertuples(index=False):
        samples = _samples(row.history)
        window = _window(row.window, samples, ctx)
        current_lag = None if pd.isna(row.lag) else int(row.lag)
        # Burrow's broker offsets: the newest end offsets, one window's worth.
        broker_offsets = [end for _, end in samples[-ctx.window :]]
        status = evaluate(window, current_lag, ctx.now_ms, broker_offsets, rules)
        rows.append(
            {
                "group": row.group,
                "topic": row.topic,
                "partition": row.partition,
                "status": status,
                "current_offset": row.offset,
                "current_lag": current_lag,
                "window_commits": len(window),
                "complete": complete(window, rules),
                "window_start_offset": window[0].offset if window else None,
                "window_end_offset": window[-1].offset if window else None,
                "window_start": window[0].timestamp_ms if window else None,
                "window_end": window[-1].timestamp_ms if window else None,
            }
        )
    frame = pd.DataFrame(rows)
    by_group = frame.groupby("group")
    frame["group_worst"] = frame["group"].map(by_group["status"].agg(worst))
    frame["group_status"] = frame["group"].map(by_group["status"].agg(group_status))
    frame["group_complete"] = frame["group"].map(
        by_group["complete"].agg(lambda c: group_complete(list(c)))
    )
    for column in ("status", "group_worst", "group_status"):
        frame[column] = frame[column].map(lambda s: s.value)
    for column in ("current_lag", "window_start_offset", "window_end_offset"):
        frame[column] = frame[column].astype("Int64")
    frame["window_start"] = ms_to_time(frame["window_start"])
    frame["window_end"] = ms_to_time(frame["window_end"])
    frame["evaluated_at"] = ms_to_time(pd.Series([ctx.now_ms] * len(frame)))
    return to_table(frame.sort_values(["group", "topic", "partition"]), LAG_STATUS)


def lag_history(snap: Snapshot, ctx: Context) -> pa.Table:
    """Each group partition's lag per bucket of the sampler, within the retention."""
    samples = snap.frame(LAG_SAMPLES)
    if samples.empty:
        return LAG_HISTORY.empty_table()
    frame = samples[samples["sampled_ms"] >= ctx.now_ms - ctx.retention_ms]
    frame = frame.assign(
        time=ms_to_time(frame["sampled_ms"]),
        lag=(frame["log_end_offset"] - frame["committed_offset"]).clip(lower=0),
        coordinator_shard=frame["shard"],
    )
    return to_table(frame.sort_values(["group", "topic", "partition", "time"]), LAG_HISTORY)


def _window(entries: object, samples: list[tuple[int, int]], ctx: Context) -> list[Commit]:
    """The fold's window (newest first) as Burrow commits, oldest first, with their lags."""
    commits = []
    for entry in reversed(list(entries if entries is not None else ())):  # type: ignore[call-overload]
        offset, timestamp = int(entry["offset"]), int(entry["commit_timestamp_ms"])
        commits.append(
            Commit(offset, timestamp, lag_at(offset, timestamp, samples, ctx.sample_gap_ms))
        )
    return thin(commits, ctx.min_distance_ms)


def _samples(history: object) -> list[tuple[int, int]]:
    if history is None or (isinstance(history, float) and np.isnan(history)):
        return []
    return [(int(s["sampled_ms"]), int(s["log_end_offset"])) for s in history]  # type: ignore[attr-defined]


__all__ = ["Status", "group_offsets", "lag_history", "lag_status", "log_end_offsets"]
