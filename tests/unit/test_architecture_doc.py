"""Every reference to docs/architecture.md names a section that exists there, and its Layers
table is what the code imports."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest
import tomllib

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


# -- the Layers table ------------------------------------------------------------------

ROOT_PACKAGE = "kafkacoord"
NAME = re.compile(r"`([^`]+)`")
ASIDE = re.compile(r"\([^)]*\)")  # what a parenthesis says narrows a name; it names none


@dataclass(frozen=True)
class Row:
    """One row of the Layers table: its packages or modules, and what they may import."""

    names: tuple[str, ...]
    imports: tuple[str, ...]


def _dotted(name: str) -> str:
    """``coordinator/groups/`` or ``gc_pause.py`` or ``coordinator.protocol``, under the root."""
    return f"{ROOT_PACKAGE}.{name.removesuffix('.py').strip('/').replace('/', '.')}"


def layer_rows(doc: str) -> list[Row]:
    section = doc.split('<a id="layers"></a>', 1)[1].split("<a id=", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        package, _holds, imports = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rows.append(
            Row(
                tuple(_dotted(n) for n in NAME.findall(package)),
                tuple(_dotted(n) for n in NAME.findall(ASIDE.sub("", imports))),
            )
        )
    return rows


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _owner(rows: list[Row], module: str) -> tuple[Row, str] | None:
    """The row of ``module`` and the name there it falls under (the longest)."""
    found = [(row, n) for row in rows for n in row.names if _within(module, n)]
    return max(found, key=lambda found: len(found[1]), default=None)


def layer_violations(rows: list[Row], graph: grimp.ImportGraph) -> list[str]:
    """Imports the table does not allow, and names in it that import nothing it lists."""
    problems: list[str] = []
    used: set[tuple[Row, str]] = set()
    for importer in sorted(graph.modules):
        owner = _owner(rows, importer)
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            target = _owner(rows, imported)
            if owner is None:
                if (importer, imported) != (ROOT_PACKAGE, "kafkacoord.compiled"):  # the guard
                    problems.append(f"{importer} is in no row, yet imports {imported}")
            elif target is None:
                if imported != ROOT_PACKAGE:  # the root's __version__: anyone may read it
                    problems.append(f"{importer} imports {imported}, which is in no row")
            elif target[0] is not owner[0]:
                allowed = [n for n in owner[0].imports if _within(imported, n)]
                if not allowed:
                    problems.append(f"{importer} imports {imported}: not in its row")
                used.update((owner[0], n) for n in allowed)
    for row in rows:
        problems.extend(
            f"{', '.join(row.names)} imports nothing from {n}"
            for n in row.imports
            if (row, n) not in used
        )
    return problems


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(ROOT_PACKAGE, cache_dir=None)


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return layer_rows(DOC.read_text())


def test_the_layers_table_covers_the_package(rows: list[Row], graph: grimp.ImportGraph) -> None:
    assert len(rows) >= 10
    named = [n for row in rows for n in (*row.names, *row.imports)]
    assert [n for n in named if n not in graph.modules] == []
    # Outside every row: the root (its __version__ and the build guard) and namespace-only
    # __init__ files.
    outside = {m for m in graph.modules if _owner(rows, m) is None}
    assert ROOT_PACKAGE in outside
    assert graph.find_modules_directly_imported_by(ROOT_PACKAGE) == {"kafkacoord.compiled"}
    rest = outside - {ROOT_PACKAGE}
    assert all(not graph.find_modules_directly_imported_by(m) for m in rest), rest


def test_the_layers_table_is_the_import_graph(rows: list[Row], graph: grimp.ImportGraph) -> None:
    assert layer_violations(rows, graph) == []


def test_imports_the_table_does_not_list_are_found(
    rows: list[Row], graph: grimp.ImportGraph
) -> None:
    wrong = copy.deepcopy(graph)
    wrong.add_import(importer="kafkacoord.codecs.records", imported="kafkacoord.storage.cache")
    wrong.add_import(
        importer="kafkacoord.coordinator.controller.shard",
        imported="kafkacoord.coordinator.runtime.host",
    )
    assert layer_violations(rows, wrong) == [
        "kafkacoord.codecs.records imports kafkacoord.storage.cache: not in its row",
        "kafkacoord.coordinator.controller.shard imports kafkacoord.coordinator.runtime.host: "
        "not in its row",
    ]
    # A row that lists what it never imports is found too.
    stale = [Row(row.names, (*row.imports, "kafkacoord.spark")) for row in rows]
    assert "kafkacoord.codecs imports nothing from kafkacoord.spark" in layer_violations(
        stale, graph
    )


def _layers(contract_id: str) -> tuple[str, list[list[str]]]:
    """A layers contract of pyproject.toml: its container and its layers, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("id") == contract_id]
    (container,) = contract["containers"]
    return container, [re.split(r"\s*[|:]\s*", layer.strip()) for layer in contract["layers"]]


@pytest.mark.parametrize("contract_id", ["layers", "coordinator-layers"])
def test_the_layers_table_allows_only_what_the_contracts_allow(
    rows: list[Row], contract_id: str
) -> None:
    container, layers = _layers(contract_id)
    depth = {f"{container}.{name}": index for index, layer in enumerate(layers) for name in layer}

    def layer_of(module: str) -> str | None:
        return next((name for name in depth if _within(module, name)), None)

    # The contract's layers are exactly the table's packages under the container.
    assert {layer_of(n) for row in rows for n in row.names if _within(n, container)} == set(depth)
    upward = [
        f"{name} -> {allowed}"
        for row in rows
        for name in row.names
        for allowed in row.imports
        if (a := layer_of(name)) is not None
        and (b := layer_of(allowed)) is not None
        and a != b
        and depth[b] <= depth[a]
    ]
    assert upward == []
