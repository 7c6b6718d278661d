"""The package's layers, held on its import graph (docs/architecture.md, "Layers").

Every module under harness/ is parsed with `ast` (nothing is imported) and belongs to the unit of
LAYERS with the longest dotted prefix of its name. Every `import` and `from ... import` of a harness
module is an edge: at module level, inside a function, and under `if TYPE_CHECKING:` alike. Then:

  - an edge between two units goes down a layer, or sideways along one of SIDEWAYS: never up, and
    never sideways otherwise;
  - the units form no cycle, and neither do the modules (an import inside a function or under
    TYPE_CHECKING cannot hide one: the modules' graph counts every executed import);
  - an import inside a function says why it is late in a comment on its line or the line above
    (a heavy or optional dependency: transformers, vllm, mlflow, optuna, matplotlib, ...).

A failure names the importing file, the line and the imported module.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"

# Bottom first. A layer may import every layer below it; a unit is a package or a module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("harness", "harness.atomic", "harness.jsonl", "harness.machine", "harness.threads",
              "harness.faults", "harness.argtypes")),
    ("objective", ("harness.objective",)),
    ("parts of a run", ("harness.models", "harness.tasks", "harness.rollout", "harness.tracking")),
    ("config", ("harness.config",)),
    ("train core", ("harness.train.core",)),
    ("trainers", ("harness.train.rl", "harness.train.dpo", "harness.train.eval", "harness.train.diagnostics")),
    ("run", ("harness.train", "harness.train.run")),
    ("commands", ("harness.cli", "harness.experiment", "harness.probes", "harness.bench")),
)
# The imports allowed between two units of one layer (importer -> imported).
SIDEWAYS: frozenset[tuple[str, str]] = frozenset({
    ("harness.rollout", "harness.models"),              # a backend loads and scores with the model
    ("harness.train.rl", "harness.train.diagnostics"),  # the RL step logs the diagnostics
    ("harness.train.eval", "harness.train.diagnostics"),  # an eval reports the rollout metrics
    ("harness.cli", "harness.experiment"),              # `harness` wires every command
    ("harness.cli", "harness.probes"),
    ("harness.cli", "harness.bench"),
    ("harness.probes", "harness.experiment"),           # a probe reads its study's arms
})

LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
LAYER_NAME = [name for name, _ in LAYERS]


@dataclass(frozen=True)
class Edge:
    importer: str   # module name
    imported: str   # module name
    path: Path      # the importer's file
    line: int
    late: bool      # inside a function
    typing_only: bool  # under `if TYPE_CHECKING:`

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def unit_of(module: str) -> str:
    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        if name in LAYER_OF:
            return name
        parts.pop()
    raise AssertionError(f"{module} is in no unit of LAYERS (tests/test_import_layers.py): give it a layer")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The harness modules an import statement loads (a name imported from a package that is not a
    submodule counts as the package itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "harness"]
    if node.level:  # relative: from the importer's package
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source.split(".")[0] != "harness":
        return []
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, late: bool, typing_only: bool):
    """(import node, inside a function, under TYPE_CHECKING) for every import below `node`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, late, typing_only
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, True, typing_only)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), late, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), late, typing_only)
        else:
            yield from _walk(child, late, typing_only)


def _edges() -> tuple[list[Edge], list[tuple[Path, int, str]]]:
    """Every import edge between harness modules, and every late import without a comment."""
    edges, silent = [], []
    for module, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source, filename=str(path))
        for node, late, typing_only in _walk(tree, False, False):
            if late and not any("#" in lines[i] for i in (node.lineno - 2, node.lineno - 1) if i >= 0):
                silent.append((path, node.lineno, ast.unparse(node)))
            for target in _targets(node, module, path.name == "__init__.py"):
                if target != module:
                    edges.append(Edge(module, target, path, node.lineno, late, typing_only))
    return edges, silent


EDGES, SILENT_LATE_IMPORTS = _edges()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    for module in MODULES:
        unit_of(module)  # raises, naming the module


def test_sideways_pairs_are_units_of_one_layer():
    for a, b in SIDEWAYS:
        assert a in LAYER_OF and b in LAYER_OF and LAYER_OF[a] == LAYER_OF[b], (a, b)


def test_no_import_goes_up_or_sideways():
    bad = []
    for e in EDGES:
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a == b or LAYER_OF[b] < LAYER_OF[a] or (a, b) in SIDEWAYS:
            continue
        way = "up" if LAYER_OF[b] > LAYER_OF[a] else "sideways"
        bad.append(f"{e.where()}: {way}, from {a} ({LAYER_NAME[LAYER_OF[a]]}) to {b} ({LAYER_NAME[LAYER_OF[b]]})")
    assert not bad, "imports against the layers (docs/architecture.md, Layers):\n" + "\n".join(bad)


def test_no_cycle_between_units():
    graph: dict[str, set[str]] = {}
    for e in EDGES:
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a != b:
            graph.setdefault(a, set()).add(b)
    cycles = _cycles(graph)
    detail = [e.where() for e in EDGES for c in cycles
              if unit_of(e.importer) in c and unit_of(e.imported) in c and unit_of(e.importer) != unit_of(e.imported)]
    assert not cycles, f"units importing each other: {cycles}\n" + "\n".join(detail)


def test_no_cycle_between_modules():
    """A cycle that only an import inside a function lets load is a cycle all the same."""
    graph: dict[str, set[str]] = {}
    for e in EDGES:
        if not e.typing_only:
            graph.setdefault(e.importer, set()).add(e.imported)
    cycles = _cycles(graph)
    detail = [e.where() + (" (inside a function)" if e.late else "") for e in EDGES for c in cycles
              if not e.typing_only and e.importer in c and e.imported in c]
    assert not cycles, f"modules importing each other: {cycles}\n" + "\n".join(detail)


def test_a_late_import_says_why():
    bad = [f"{p.relative_to(ROOT)}:{line}: {text}" for p, line, text in SILENT_LATE_IMPORTS]
    assert not bad, ("imports inside a function without a comment saying why they are late (a heavy or "
                     "optional dependency; never to dodge a cycle):\n" + "\n".join(bad))


def test_the_checks_see_what_they_check():
    """The graph is the package's: the edges the layers rest on are found, a late import is seen as late."""
    found = {(e.importer, e.imported) for e in EDGES}
    assert ("harness.train.rl.step", "harness.objective") in found
    assert any(e.late for e in EDGES)
    assert len(MODULES) > 100
