"""Logged tracebacks never show local variables: a secret a frame holds stays out of the log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from kafkacoord import logs

SECRET = "s3cr3t-7c9e1f0a-do-not-log"


class InjectedError(RuntimeError):
    pass


def leaky_handler(request_body: dict[str, str]) -> None:
    password = SECRET  # a local variable rich would print next to the frame
    token = request_body["token"]
    raise InjectedError(f"failed after reading {len(password) + len(token)} characters")


def caller() -> None:
    credentials = {"token": SECRET + "-token"}
    leaky_handler(credentials)


@pytest.fixture
def restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()


def log_stdlib(how: str) -> None:
    log = logging.getLogger("kafkacoord.test.logs")
    try:
        caller()
    except InjectedError as exc:
        if how == "exception":
            log.exception("request failed")
        else:  # as the timers log: exc_info the exception itself
            log.error("timer %r failed; retrying", ("heartbeat", "g", "m"), exc_info=exc)


def log_structlog(how: str) -> None:
    log = structlog.get_logger("kafkacoord.test.logs")
    try:
        caller()
    except InjectedError as exc:
        if how == "exception":
            log.exception("request failed")
        else:
            log.error("timer failed", exc_info=exc)


EMITTERS = {"stdlib": log_stdlib, "structlog": log_structlog}


@pytest.mark.usefixtures("restored")
@pytest.mark.parametrize("how", ["exception", "exc_info"])
@pytest.mark.parametrize("emitter", list(EMITTERS))
def test_console_tracebacks_hold_no_locals(
    emitter: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(fmt="console")
    EMITTERS[emitter](how)
    err = capsys.readouterr().err
    assert "InjectedError" in err
    assert "leaky_handler" in err and "caller" in err
    assert "Traceback" in err
    assert SECRET not in err
    assert "locals" not in err  # rich's panel of a frame's variables


@pytest.mark.usefixtures("restored")
@pytest.mark.parametrize("how", ["exception", "exc_info"])
@pytest.mark.parametrize("emitter", list(EMITTERS))
def test_json_tracebacks_hold_no_locals(
    emitter: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(fmt="json")
    EMITTERS[emitter](how)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    entry = json.loads(lines[0])
    assert SECRET not in err
    assert "exc_info" not in entry
    trace = entry["exception"]
    assert isinstance(trace, str)
    assert "Traceback" in trace and "InjectedError" in trace
    assert "leaky_handler" in trace and "caller" in trace
    assert entry["level"] == "error"


@pytest.mark.usefixtures("restored")
def test_configure_replaces_the_root_handlers_and_sets_the_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(level="warning", fmt="json")
    root = logging.getLogger()
    assert len(root.handlers) == 1 and root.level == logging.WARNING
    logging.getLogger("kafkacoord.test.logs").info("hidden %s", SECRET)
    logging.getLogger("kafkacoord.test.logs").warning("shown")
    err = capsys.readouterr().err
    assert SECRET not in err
    assert json.loads(err.strip())["event"] == "shown"


def test_the_fixture_left_logging_as_it_was() -> None:
    """Runs after the others in this file: structlog is back to its defaults."""
    config = structlog.get_config()
    assert not isinstance(config["logger_factory"], structlog.stdlib.LoggerFactory)
    assert not any(
        isinstance(h.formatter, structlog.stdlib.ProcessorFormatter)
        for h in logging.getLogger().handlers
    )
