"""The fault campaign in CI: a short random campaign on each broker finds nothing, and a
deliberately broken daemon is caught."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .campaign import Campaign, Result, Step

pytestmark = [pytest.mark.integration, pytest.mark.nemesis]


@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_a_short_campaign_finds_no_anomaly(broker: str, tmp_path: Path) -> None:
    campaign = Campaign(broker, tmp_path, seed=20261127)
    try:
        campaign.start()
        result = campaign.run(75.0)
    finally:
        campaign.close()
    assert not any(result.anomalies.values()), "\n".join(result.details[:20])
    assert sum(result.faults.values()) >= 5 and len(result.faults) >= 4, result.faults
    assert result.ops_ok > 500, result.line()
    assert (tmp_path / "timeline.png").stat().st_size > 10_000


def _moving_every_shard(daemon_module: str, out: Path) -> Result:
    """Client c2 loses the broker, so its routes stay as they were; each daemon in turn is
    paused until its node is fenced and its shards move, then resumes. c2 keeps asking the
    daemons its frozen routes name, while c1 commits through the new leaders."""
    campaign = Campaign("tansu", out, seed=7, daemon_module=daemon_module)
    try:
        campaign.start()
        started = time.monotonic()
        with campaign.fault(Step(0, "partition-client-broker", "c2|broker", 0)):
            for daemon in ("d1", "d2", "d3"):
                # The daemon resumed last must be back in every shard's ISR first: were
                # the one paused next the only replica left in it, no leader would be
                # eligible and its shards would stay offline until it resumed.
                assert campaign.replicated()["waiting"] == []
                with campaign.fault(Step(0, "pause-daemon", daemon, 0)):
                    # Past a controller failover (3 s) and the node session it grants
                    # (3 s), then until everything serves without it: fenced, its shards
                    # moved. On tansu a failover can take longer when the paused daemon
                    # was the controller and held a transaction open.
                    time.sleep(6)
                    assert campaign.serve(within_s=40)["waiting"] == []
                time.sleep(6)  # resumed: it learns its shards left while c2 still asks it
        return campaign.finish(round(time.monotonic() - started, 1))
    finally:
        campaign.close()


def test_the_checker_catches_a_daemon_answering_from_memory(tmp_path: Path) -> None:
    """The broken build (tests/nemesis/stale_daemon.py) answers a fetch for a shard it
    lost from its old copy: stale reads. The real daemon, in the same run, has none."""
    broken = _moving_every_shard("tests.nemesis.stale_daemon", tmp_path / "broken")
    assert broken.anomalies["stale_read"] > 0, broken.line()
    real = _moving_every_shard("kafkacoord", tmp_path / "real")
    assert not any(real.anomalies.values()), "\n".join(real.details[:20])
    assert real.ops_ok > 200, real.line()


def test_a_daemon_cut_off_with_its_clients_answers_nothing_from_memory(tmp_path: Path) -> None:
    """Each daemon in turn is cut off from everything but client c1 (its routes then stay
    as they were) for longer than the node session: the controller moves its shards, and
    c2 commits through their new leaders. c1 keeps asking the cut-off daemon, which once
    answered from memory: a stale read (found by the campaign, seed 5 on Apache Kafka). Its
    node lease has lapsed by then, so it answers NOT_COORDINATOR instead."""
    # c1 only reads: the cut-off daemon has no append of c1's waiting, which would hold
    # back its answers to c1, so it answers as soon as it is asked.
    campaign = Campaign("kafka", tmp_path, seed=9, readers=frozenset({"c1"}))
    try:
        campaign.start()
        started = time.monotonic()
        hosts = campaign.hosts
        for daemon in ("d1", "d2", "d3"):
            # The writers lose it first, so no append of theirs is left waiting there: a
            # shard with one would reload when it failed and answer nothing at all.
            for writer in ("c2", "c3"):
                campaign.lab.cut(hosts[writer], hosts[daemon])
            time.sleep(1.5)
            with campaign.fault(Step(0, "partition-majority", f"{daemon}|c1", 0)):
                time.sleep(12)
            assert campaign.serve()["waiting"] == []
        result = campaign.finish(round(time.monotonic() - started, 1))
    finally:
        campaign.close()
    assert not any(result.anomalies.values()), "\n".join(result.details[:20])
    assert result.ops_ok > 200, result.line()
