"""The direction of imports: no module imports one in a layer above its own, and no two
modules import each other, even under `TYPE_CHECKING` or inside a function.

The layers are those of `docs/architecture.md` ("The direction of imports"), top-down; a
module belongs to the layer of the longest prefix that names it, so a folder can keep a
module that sits lower than the folder (`worktrees.isolation`, the records every task
carries, sits with the domain). A new module that no prefix names fails here until it is
placed, in this table and in the docs (`slotline` names the package's own `__init__`
only, not every module under it).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "slotline"
DOCS = ROOT / "docs" / "architecture.md"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("entry points", ("slotline", "slotline.__main__", "slotline.cli")),
    ("HTTP server", ("slotline.server", "slotline.dashboard")),
    ("MCP tools", ("slotline.mcp",)),
    ("faces", ("slotline.api", "slotline.client")),
    ("node", ("slotline.node",)),
    ("features at work", ("slotline.worktrees", "slotline.webhooks")),
    ("runner", ("slotline.runner",)),
    ("configuration", ("slotline.config", "slotline.pacing.config", "slotline.webhooks.config")),
    ("store", ("slotline.store", "slotline.worktrees.git", "slotline.worktrees.pinning")),
    (
        "rules",
        ("slotline.scheduler", "slotline.pacing", "slotline.worktrees.prune", "slotline.stats"),
    ),
    (
        "domain",
        (
            "slotline.bounds",
            "slotline.clock",
            "slotline.config.settings",
            "slotline.errors",
            "slotline.fencing",
            "slotline.frozen",
            "slotline.limits",
            "slotline.line",
            "slotline.models",
            "slotline.reach",
            "slotline.runlogs",
            "slotline.sessions",
            "slotline.spec",
            "slotline.stops",
            "slotline.taskfilter",
            "slotline.tasktoken",
            "slotline.transitions",
            "slotline.worktrees.isolation",
        ),
    ),
]


def module_names() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = module_names()


def imported_module(name: str) -> str:
    """The module `name` lives in: itself, or the longest module prefix of it."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports() -> dict[str, set[str]]:
    """Every slotline module each module imports, wherever the import statement is."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("slotline."):
                    target = imported_module(name)
                    # `from slotline import X`, X an attribute of the package: the root's
                    # lazy exports, which import nothing until used.
                    if target not in (module, "slotline"):
                        graph[module].add(target)
    return graph


def layer_of(module: str) -> int:
    best, found = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            covers = module == prefix or (prefix != "slotline" and module.startswith(prefix + "."))
            if covers and len(prefix) > best:
                best, found = len(prefix), index
    return found


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if layer_of(m) < 0)
    assert not unplaced, f"place these in LAYERS and docs/architecture.md: {unplaced}"


def test_no_module_imports_one_in_a_layer_above_its_own() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(imports().items())
        for target in sorted(targets)
        if layer_of(target) < layer_of(module)
    ]
    assert not upward, "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"slotline.models": {"slotline.spec"}, "slotline.spec": {"slotline.models"}}
    assert cycles(graph) == [["slotline.models", "slotline.spec"]]


def test_no_two_modules_import_each_other() -> None:
    assert cycles(imports()) == []


def documented_layers() -> list[tuple[str, tuple[str, ...]]]:
    """The numbered list under "The direction of imports" in docs/architecture.md:
    `N. **name**: `prefix`, `prefix` …`."""
    text = DOCS.read_text()
    section = text.split("### The direction of imports", 1)[1].split("\n#", 1)[0]
    layers = []
    for item in re.split(r"\n(?=\d+\. )", section):
        match = re.match(r"\d+\. \*\*(.+?)\*\*:(.*)", item.split("\n\n")[0], re.S)
        if match:
            names = re.findall(r"`([\w.]+)`", match.group(2))
            prefixes = tuple(n if n == "slotline" else f"slotline.{n}" for n in names)
            layers.append((match.group(1), prefixes))
    return layers


def test_the_docs_state_the_same_layers() -> None:
    assert documented_layers() == LAYERS


def test_the_map_names_every_folder_and_root_module() -> None:
    text = DOCS.read_text()
    tree = text.split("## The map", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"^  ([\w.]+/?)", tree, re.M))
    named |= {n.strip() for line in tree.splitlines() if "," in line for n in line.split(",")}
    folders = {f"{p.parent.name}/" for p in SRC.glob("*/__init__.py")}
    roots = {p.name for p in SRC.glob("*.py")} - {"__main__.py"}
    assert folders - named == set(), "folders missing from the map"
    assert roots - named == set(), "root modules missing from the map"
