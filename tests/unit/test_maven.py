"""Jars resolved once: Maven runs on the first call only, and a failed run leaves no marker."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from rich.console import Console

from kafkacoord.maven import MARKER, copy_dependencies, downloaded_bytes

FAKE_MVN = """#!/bin/sh
echo "run $*" >> "{runs}"
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
done
[ -n "{fail}" ] && {{ echo "no such artifact" >&2; exit 3; }}
echo "Downloading from central: https://repo.example/lib/1.0/lib-1.0.pom"
echo "Downloaded from central: https://repo.example/lib/1.0/lib-1.0.pom (459 B at 2.0 kB/s)"
echo "Downloaded from central: https://repo.example/lib/1.0/lib-1.0.jar (2.1 MB at 5 MB/s)"
mkdir -p "$out" && touch "$out/lib-1.0.jar"
"""


def _mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, fail: bool) -> Path:
    bin_dir, runs = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "mvn"
    script.write_text(FAKE_MVN.format(runs=runs, fail="yes" if fail else ""))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return runs


def _resolve(home: Path, pom: Path, progress: Console | None = None) -> Path:
    return copy_dependencies(
        home, pom, {"x.version": "1.0"}, what="x",
        no_maven=lambda libs: RuntimeError("no mvn"),
        failed=lambda code, output: RuntimeError(f"exit {code}: {output}"),
        progress=progress,
    )  # fmt: skip


def test_resolved_once_then_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _mvn(tmp_path, monkeypatch, fail=False)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    libs = _resolve(tmp_path / "home", pom)
    assert [p.name for p in libs.iterdir()] == ["lib-1.0.jar"]
    assert (tmp_path / "home" / MARKER).read_text().startswith("1.0 ")
    assert _resolve(tmp_path / "home", pom) == libs
    assert runs.read_text().count("run") == 1
    # Not on a terminal (the tests' stderr is captured): Maven stays quiet, no bar.
    assert " -q" in runs.read_text()


def test_a_changed_pom_resolves_again_and_a_hand_made_marker_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _mvn(tmp_path, monkeypatch, fail=False)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    _resolve(tmp_path / "home", pom)
    pom.write_text("<project><dependencies/></project>")  # a release adds a jar
    _resolve(tmp_path / "home", pom)
    _resolve(tmp_path / "home", pom)
    assert runs.read_text().count("run") == 2
    (tmp_path / "home" / MARKER).write_text("")  # jars put in place by hand
    pom.write_text("<project>other</project>")
    _resolve(tmp_path / "home", pom)
    assert runs.read_text().count("run") == 2


def test_a_failed_run_says_why_and_leaves_no_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mvn(tmp_path, monkeypatch, fail=True)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    with pytest.raises(RuntimeError, match="exit 3: no such artifact"):
        _resolve(tmp_path / "home", pom)
    assert not (tmp_path / "home" / MARKER).exists()


def test_on_a_terminal_the_downloads_show_on_a_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _mvn(tmp_path, monkeypatch, fail=False)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    screen = io.StringIO()
    libs = _resolve(tmp_path / "home", pom, Console(file=screen, force_terminal=True, width=120))
    assert [p.name for p in libs.iterdir()] == ["lib-1.0.jar"]
    drawn = screen.getvalue()
    assert "Resolving x jars" in drawn and "2 files" in drawn and "2.1 MB" in drawn
    assert " -q" not in runs.read_text()  # Maven names its downloads only when not quiet


def test_a_failure_on_a_terminal_still_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mvn(tmp_path, monkeypatch, fail=True)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    console = Console(file=io.StringIO(), force_terminal=True)
    with pytest.raises(RuntimeError, match="exit 3: no such artifact"):
        _resolve(tmp_path / "home", pom, console)
    assert not (tmp_path / "home" / MARKER).exists()


@pytest.mark.parametrize(
    ("line", "size"),
    [
        ("Downloaded from central: https://r/a.pom (459 B at 2.0 kB/s)", 459),
        ("Downloaded from central: https://r/a.jar (2.1 MB at 5.3 MB/s)", 2_100_000),
        ("[INFO] Downloaded from central: https://r/a.pom (13 kB at 14 kB/s)", 13_000),
        ("Downloading from central: https://r/a.jar", None),
        ("[INFO] BUILD SUCCESS", None),
    ],
)
def test_the_size_of_each_download(line: str, size: int | None) -> None:
    assert downloaded_bytes(line) == size
