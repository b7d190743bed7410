"""kafka-consumer-groups' reset CSV: written as Kafka's --export writes it, read as its
--from-file reads it."""

from __future__ import annotations

import pytest

from kafkacoord.cli.reset_files import ResetFileError, format_reset_plans, parse_reset_plans

PLANS = {"billing": {("orders", 1): 7, ("orders", 0): 5}, "audit": {("orders", 0): 0}}


def test_one_group_exports_topic_partition_offset_lines() -> None:
    text = format_reset_plans({"billing": PLANS["billing"]}, with_group=False)
    assert text == "orders,0,5\norders,1,7\n"


def test_several_groups_export_group_first_sorted() -> None:
    text = format_reset_plans(PLANS, with_group=True)
    assert text == "audit,orders,0,0\nbilling,orders,0,5\nbilling,orders,1,7\n"


def test_a_group_id_with_a_comma_is_quoted_and_reads_back() -> None:
    plans = {"a,b": {("t", 0): 3}}
    text = format_reset_plans(plans, with_group=True)
    assert text == '"a,b",t,0,3\n'
    assert parse_reset_plans(text, None) == plans


@pytest.mark.parametrize("with_group", [False, True])
def test_an_export_reads_back_for_its_group(with_group: bool) -> None:
    text = format_reset_plans({"billing": PLANS["billing"]}, with_group=with_group)
    assert parse_reset_plans(text, "billing") == {"billing": PLANS["billing"]}


def test_a_group_first_file_serves_every_group_it_names() -> None:
    text = format_reset_plans(PLANS, with_group=True)
    assert parse_reset_plans(text, None) == PLANS
    # One --group with a file of several: Kafka reads it by group too.
    assert parse_reset_plans(text, "billing") == PLANS


def test_kafkas_own_export_reads_with_its_blank_last_line_and_crlf() -> None:
    # Kafka prints the joined records with println: one empty line at the end.
    assert parse_reset_plans("orders,0,5\norders,1,7\n\n", "g") == {
        "g": {("orders", 0): 5, ("orders", 1): 7}}  # fmt: skip
    assert parse_reset_plans("g,orders,0,5\r\n", None) == {"g": {("orders", 0): 5}}


def test_a_partition_listed_twice_keeps_its_last_line() -> None:
    assert parse_reset_plans("t,0,5\nt,0,9\n", "g") == {"g": {("t", 0): 9}}


def test_three_fields_without_exactly_one_group_is_refused() -> None:
    # --all-groups or several --group: every line must name its group.
    with pytest.raises(ResetFileError, match="line 1: expected group,topic,partition,offset"):
        parse_reset_plans("orders,0,5\n", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no lines"),
        ("\n\n", "no lines"),
        ("t,0,5\nt,1\n", "line 2: expected topic,partition,offset, got 2 fields"),
        ("t,x,5\n", "line 1: partition must be an integer, got 'x'"),
        ("t,0,five\n", "line 1: offset must be an integer"),
        ("g,t,0,5\nt,0,5\n", "line 2: expected group,topic,partition,offset"),
    ],
)
def test_malformed_files_are_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(ResetFileError, match=message):
        parse_reset_plans(text, "g")
