"""Shell completion without a cluster: each shell's script, the command names, and
topic or group lookups that find no broker (or one that never answers) give nothing,
promptly and without a word on stderr."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.completion import complete, install_entry_point

PROMPT_S = 10  # generous: the lookup gives up after 1.5 s, plus two Python starts


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_entry_point(tmp_path_factory.mktemp("bin"))


@pytest.fixture
def no_local_daemon(tmp_path: Path) -> dict[str, str | None]:
    """No bootstrap in the environment and a data directory no daemon wrote to."""
    return {"KAFKACOORD_BOOTSTRAP": None, "KAFKACOORD_DATA_DIR": str(tmp_path / "data")}


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o default -F _kafkacoord_completion kafkacoord"),
        ("zsh", "compdef _kafkacoord_completion kafkacoord"),
        ("fish", "complete --command kafkacoord --no-files"),
    ],
)
def test_show_completion_prints_each_shells_script(shell: str, marker: str, bin_dir: Path) -> None:
    # Typer's switch from the shell it detects to the one named on the command line.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    done = subprocess.run([bin_dir / "kafkacoord", "--show-completion", shell], env=env,
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert marker in done.stdout
    assert "_KAFKACOORD_COMPLETE" in done.stdout


def test_commands_and_options_complete(bin_dir: Path) -> None:
    assert complete("kafkacoord gr", bin_dir).offered == ["groups"]
    assert "--group" in complete("kafkacoord groups describe --gr", bin_dir).offered


@pytest.mark.parametrize(
    ("shell", "protocol", "answer"),
    [
        ("zsh", {}, '_arguments \'*: :(("groups":"List, describe'),
        ("fish", {"_TYPER_COMPLETE_FISH_ACTION": "get-args"}, "groups\tList, describe"),
    ],
)
def test_zsh_and_fish_get_the_same_names(
    shell: str, protocol: dict[str, str], answer: str, bin_dir: Path
) -> None:
    # What their scripts (above) send: the command line so far, in _TYPER_COMPLETE_ARGS.
    env = {**os.environ, **protocol, "_KAFKACOORD_COMPLETE": f"complete_{shell}",
           "_TYPER_COMPLETE_ARGS": "kafkacoord gr"}  # fmt: skip
    done = subprocess.run([bin_dir / "kafkacoord"], env=env, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.startswith(answer)
    assert "topics" not in done.stdout


def test_no_broker_configured_offers_nothing(
    bin_dir: Path, no_local_daemon: dict[str, str | None]
) -> None:
    done = complete("kafkacoord topics describe --topic ", bin_dir, no_local_daemon)
    assert (done.offered, done.stderr) == ([], "")


@pytest.fixture
def refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener that accepts connections and never answers a byte."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("option", "port"),
    [
        ("topics describe --topic", "silent_port"),
        ("groups describe --group", "silent_port"),
        ("groups describe --group", "refusing_port"),
    ],
)
def test_an_unreachable_broker_offers_nothing_promptly(
    option: str, port: str, bin_dir: Path, no_local_daemon: dict[str, str | None],
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    command, flag = option.rsplit(" ", 1)
    bootstrap = f"127.0.0.1:{request.getfixturevalue(port)}"
    done = complete(f"kafkacoord {command} --bootstrap {bootstrap} {flag} x", bin_dir,
                    no_local_daemon)  # fmt: skip
    assert (done.offered, done.stderr) == ([], "")
    assert done.elapsed_s < PROMPT_S, done.elapsed_s
