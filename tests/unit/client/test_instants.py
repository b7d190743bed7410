import pytest

from kafkacoord.client.instants import format_instant, parse_instant

NOW = 1_795_000_000_000  # 2026-11-18T...


@pytest.mark.parametrize(
    ("text", "back_ms"),
    [
        ("-15m", 15 * 60_000),
        ("-90s", 90_000),
        ("-2h", 7_200_000),
        ("-1d", 86_400_000),
        ("-1h30m", 5_400_000),
        ("-250ms", 250),
        ("-PT15M", 15 * 60_000),
        ("-P1DT2H", 93_600_000),
        (" -15M ", 15 * 60_000),
    ],
)
def test_relative_instants_count_back_from_now(text: str, back_ms: int) -> None:
    assert parse_instant(text, NOW) == NOW - back_ms


def test_iso_instants_with_and_without_a_zone() -> None:
    assert parse_instant("2026-11-01T12:00:00Z", NOW) == 1_793_534_400_000
    assert parse_instant("2026-11-01T12:00:00", NOW) == 1_793_534_400_000  # UTC, as --to-datetime
    assert parse_instant("2026-11-01T14:00:00.250+02:00", NOW) == 1_793_534_400_250


def test_epoch_milliseconds() -> None:
    assert parse_instant("1793534400000", NOW) == 1_793_534_400_000


@pytest.mark.parametrize("text", ["yesterday", "15m", "-15", "-m", "2026-11-01", "-PT", ""])
def test_anything_else_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"not an instant|cannot be parsed|'T' is missing"):
        parse_instant(text, NOW)


def test_the_future_is_refused() -> None:
    with pytest.raises(ValueError, match="in the future"):
        parse_instant(str(NOW + 1), NOW)


def test_format_round_trips() -> None:
    assert format_instant(1_793_534_400_250) == "2026-11-01T12:00:00.250Z"
    assert parse_instant(format_instant(NOW - 5), NOW) == NOW - 5
