"""Every reference to docs/architecture.md names a section that exists there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
CITE = re.compile(r"architecture\.md#([a-z0-9-]+)")
ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for folder in ("kafkacoord", "tests", "bench", "examples"):
        files.extend((ROOT / folder).rglob("*.py"))
    return files


def test_every_cited_section_exists() -> None:
    anchors = set(ANCHOR.findall(DOC.read_text()))
    cited: dict[str, list[str]] = {}
    for path in _sources():
        for anchor in CITE.findall(path.read_text()):
            cited.setdefault(anchor, []).append(str(path.relative_to(ROOT)))
    assert cited, "nothing cites docs/architecture.md"
    missing = {anchor: where for anchor, where in cited.items() if anchor not in anchors}
    assert not missing, missing


def test_anchors_are_unique() -> None:
    anchors = ANCHOR.findall(DOC.read_text())
    assert len(anchors) == len(set(anchors))
