"""The nemesis's schedule: replayable from its seed, every kind early, clock offsets signed."""

from __future__ import annotations

import re

from tests.nemesis.campaign import KINDS, TANSU_KINDS, schedule


def test_a_seed_draws_the_same_schedule_and_every_kind_in_its_first_round() -> None:
    steps = schedule(1127, 40, KINDS)
    assert steps == schedule(1127, 40, KINDS)
    assert steps != schedule(1128, 40, KINDS)
    assert {s.kind for s in steps[: len(KINDS)]} == set(KINDS)


def test_tansu_campaigns_never_kill_the_broker() -> None:
    assert "kill-broker" not in {s.kind for s in schedule(5, 200, TANSU_KINDS)}


def test_clock_offsets_carry_their_sign() -> None:
    # libfaketime exits the process on an offset it cannot parse, such as "41s".
    offsets = [s.detail for s in schedule(3, 400, KINDS) if s.kind.startswith("clock")]
    assert offsets and all(re.fullmatch(r"[+-]\d+s", o) for o in offsets), offsets


def test_targets_name_hosts_of_the_lab() -> None:
    hosts = {"broker", "d1", "d2", "d3", "a1", "a2", "a3", "c1", "c2"}
    for step in schedule(9, 300, KINDS):
        names = re.split(r"[|>]", step.target)
        assert set(names) <= hosts and len(set(names)) == len(names), step
