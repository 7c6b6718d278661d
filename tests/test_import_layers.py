"""The package's layers, held on its import graph (docs/architecture.md, "Layers").

Every module under harness/ is parsed with `ast` (nothing is imported) and belongs to the unit of
LAYERS with the longest dotted prefix of its name. Every `import` and `from ... import` of a harness
module is an edge: at module level, inside a function, and under `if TYPE_CHECKING:` alike. Then:

  - an edge between two units goes down a layer, or sideways along one of SIDEWAYS: never up, and
    never sideways otherwise;
  - the units form no cycle, and neither do the modules (an import inside a function or under
    TYPE_CHECKING cannot hide one: the modules' graph counts every executed import);
  - no harness module is imported inside a function (a late import is how a cycle or an upward
    import hides); inside a function only the heavy third-party packages of LATE_ALLOWED may be
    imported, so that `harness config` or a Snakemake dry run does not load transformers or vLLM;
  - inside each package of NO_TYPING_CYCLES the modules form no cycle even counting the imports under
    TYPE_CHECKING: an annotation's import never runs, but a reader follows it as any other.

The layers, on the package's names (bottom first; docs/architecture.md says the same):

    base        harness/{atomic,jsonl,machine,threads,faults,argtypes,parallel}.py: no harness import
    objective   harness/objective/
    parts       harness/models/, harness/tasks/, harness/rollout/ (+ harness/tracking/: the run's log)
    config      harness/config/: the run's YAML, checked against objective, models and tasks
    train core  harness/train/core/: collect, scoring, batch log-probs, eval prompt draw, run dir
    trainers    harness/train/{rl,dpo,eval,diagnostics}/, harness/rm/ (`harness train-rm`)
    run         harness/train/run/ (the shell) and harness/train/__init__.py (`train`, its entry)
    commands    harness/cli.py, harness/experiment/, harness/probes/, harness/bench/

A failure names the importing file, the line and the imported module. The checks are tested on a
fake package too (test_the_checks_fail_on_*): a check that cannot fail is a defect.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"

# Bottom first. A layer may import every layer below it; a unit is a package or a module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "harness",
            "harness.atomic",
            "harness.jsonl",
            "harness.machine",
            "harness.threads",
            "harness.faults",
            "harness.argtypes",
            "harness.parallel",
        ),
    ),
    ("objective", ("harness.objective",)),
    ("parts of a run", ("harness.models", "harness.tasks", "harness.rollout", "harness.tracking")),
    ("config", ("harness.config",)),
    ("train core", ("harness.train.core",)),
    (
        "trainers",
        ("harness.train.rl", "harness.train.dpo", "harness.train.eval", "harness.train.diagnostics", "harness.rm"),
    ),
    ("run", ("harness.train.run", "harness.train")),
    ("commands", ("harness.cli", "harness.experiment", "harness.probes", "harness.bench")),
)
# The imports allowed between two units of one layer (importer -> imported).
SIDEWAYS: frozenset[tuple[str, str]] = frozenset(
    {
        ("harness.rollout", "harness.models"),  # a backend loads and scores with the model
        ("harness.tasks", "harness.models"),  # a reward model scores with the rendering train-rm trains on
        ("harness.train.rl", "harness.train.diagnostics"),  # the RL step logs the diagnostics
        ("harness.train.eval", "harness.train.diagnostics"),  # an eval reports the rollout metrics
        ("harness.cli", "harness.experiment"),  # `harness` wires every command
        ("harness.cli", "harness.probes"),
        ("harness.cli", "harness.bench"),
        ("harness.probes", "harness.experiment"),  # a probe reads its study's arms
        ("harness.train", "harness.train.run"),  # `from harness.train import train`: the run shell's entry
    }
)
# The only packages a function may import (heavy or optional third-party: seconds to load, or absent
# where they are not needed). Never a harness module, never one to dodge a cycle.
LATE_ALLOWED: frozenset[str] = frozenset(
    {
        "transformers",
        "vllm",
        "safetensors",
        "peft",  # model code: loaded where a model is built or served
        "torch",  # harness/threads.py sizes torch's pools only if loaded
        "mlflow",
        "optuna",  # tracking and tuning: only the commands that use them
        "matplotlib",
        "pandas",
        "scipy",  # figures and tables: only where they are drawn
        "datasets",
        "math_verify",  # a dataset task's files and math answers
        "huggingface_hub",  # only where a Hub id is resolved
    }
)

# The packages whose modules import each other in no circle, the imports under TYPE_CHECKING counted: the
# objective's rooms below config.py annotate with fields.ObjectiveKnobs, never config.ObjectiveConfig.
NO_TYPING_CYCLES: tuple[str, ...] = ("harness.objective",)

LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
LAYER_NAME = [name for name, _ in LAYERS]


@dataclass(frozen=True)
class Edge:
    importer: str  # module name
    imported: str  # module name
    path: Path  # the importer's file
    line: int
    late: bool  # inside a function
    typing_only: bool  # under `if TYPE_CHECKING:`

    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line} imports {self.imported}"


def _shown(path: Path) -> str:
    """harness/x/y.py, whichever folder holds the package (this repository's, or a test's fake one)."""
    parts = path.parts
    return "/".join(parts[len(parts) - 1 - parts[::-1].index("harness") :])


def package_modules(package: Path) -> dict[str, Path]:
    """module name -> file, for every module of the package folder `package` (named harness)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES: dict[str, Path] = package_modules(PACKAGE)


def unit_of(module: str) -> str:
    parts = module.split(".")
    while parts:
        name = ".".join(parts)
        if name in LAYER_OF:
            return name
        parts.pop()
    raise AssertionError(f"{module} is in no unit of LAYERS (tests/test_import_layers.py): give it a layer")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """The harness modules an import statement loads (a name imported from a package that is not a
    submodule counts as the package itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "harness"]
    if node.level:  # relative: from the importer's package
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source.split(".")[0] != "harness":
        return []
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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


def _late_not_allowed(node: ast.Import | ast.ImportFrom) -> bool:
    """An import inside a function of anything but a LATE_ALLOWED package (a relative one is harness's)."""
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] not in LATE_ALLOWED
    return any(a.name.split(".")[0] not in LATE_ALLOWED for a in node.names)


def _edges(modules: dict[str, Path]) -> tuple[list[Edge], list[tuple[Path, int, str]]]:
    """Every import edge between harness modules, and every import inside a function it may not make."""
    edges, late_bad = [], []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, late, typing_only in _walk(tree, False, False):
            if late and _late_not_allowed(node):
                late_bad.append((path, node.lineno, ast.unparse(node)))
            for target in _targets(node, module, path.name == "__init__.py", modules):
                if target != module:
                    edges.append(Edge(module, target, path, node.lineno, late, typing_only))
    return edges, late_bad


EDGES, LATE_IMPORTS = _edges(MODULES)


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


def against_layers(edges: list[Edge]) -> list[str]:
    """The edges going up a layer, or sideways without being one of SIDEWAYS."""
    bad = []
    for e in edges:
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a == b or LAYER_OF[b] < LAYER_OF[a] or (a, b) in SIDEWAYS:
            continue
        way = "up" if LAYER_OF[b] > LAYER_OF[a] else "sideways"
        bad.append(f"{e.where()}: {way}, from {a} ({LAYER_NAME[LAYER_OF[a]]}) to {b} ({LAYER_NAME[LAYER_OF[b]]})")
    return bad


def unit_cycles(edges: list[Edge]) -> tuple[list[list[str]], list[str]]:
    """(the cycles between units, the edges that make them)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a != b:
            graph.setdefault(a, set()).add(b)
    cycles = _cycles(graph)
    detail = [
        e.where()
        for e in edges
        for c in cycles
        if unit_of(e.importer) in c and unit_of(e.imported) in c and unit_of(e.importer) != unit_of(e.imported)
    ]
    return cycles, detail


def edge_cycles(edges: list[Edge], keep, note) -> tuple[list[list[str]], list[str]]:
    """(the cycles of the module graph of the edges `keep(edge)` admits, the statements that make them, each
    with `note(edge)` after it, one line per statement however many names it imports)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if keep(e):
            graph.setdefault(e.importer, set()).add(e.imported)
    cycles = _cycles(graph)
    detail = [e.where() + note(e) for e in edges for c in cycles if keep(e) and e.importer in c and e.imported in c]
    return cycles, list(dict.fromkeys(detail))


def module_cycles(edges: list[Edge]) -> tuple[list[list[str]], list[str]]:
    """(the cycles between modules, the edges that make them). One that only an import inside a function
    lets load is a cycle all the same; an import under TYPE_CHECKING never runs."""
    return edge_cycles(edges, lambda e: not e.typing_only, lambda e: " (inside a function)" if e.late else "")


def package_cycles(edges: list[Edge], package: str) -> tuple[list[list[str]], list[str]]:
    """(the cycles between the modules of `package` (its own and its subpackages'), counting the imports under
    TYPE_CHECKING and inside functions, the edges that make them)."""

    def inside(module: str) -> bool:
        return module == package or module.startswith(package + ".")

    return edge_cycles(
        edges,
        lambda e: inside(e.importer) and inside(e.imported),
        lambda e: " (under TYPE_CHECKING)" if e.typing_only else "",
    )


def test_every_module_has_a_layer():
    for module in MODULES:
        unit_of(module)  # raises, naming the module


def test_sideways_pairs_are_units_of_one_layer():
    for a, b in SIDEWAYS:
        assert a in LAYER_OF and b in LAYER_OF and LAYER_OF[a] == LAYER_OF[b], (a, b)


def test_no_import_goes_up_or_sideways():
    bad = against_layers(EDGES)
    assert not bad, "imports against the layers (docs/architecture.md, Layers):\n" + "\n".join(bad)


def test_no_cycle_between_units():
    cycles, detail = unit_cycles(EDGES)
    assert not cycles, f"units importing each other: {cycles}\n" + "\n".join(detail)


def test_no_cycle_between_modules():
    cycles, detail = module_cycles(EDGES)
    assert not cycles, f"modules importing each other: {cycles}\n" + "\n".join(detail)


def test_no_cycle_inside_a_package_even_under_type_checking():
    for package in NO_TYPING_CYCLES:
        cycles, detail = package_cycles(EDGES, package)
        assert not cycles, f"modules of {package} importing each other (TYPE_CHECKING counted): {cycles}\n" + "\n".join(
            detail
        )


def test_no_harness_import_inside_a_function():
    bad = [f"{_shown(p)}:{line}: {text}" for p, line, text in LATE_IMPORTS]
    assert not bad, (
        "imports inside a function: only the heavy packages of LATE_ALLOWED may be imported late "
        "(never a harness module: that is how a cycle or an upward import hides):\n" + "\n".join(bad)
    )


def test_the_checks_see_what_they_check():
    """The graph is the package's: the edges the layers rest on are found, a late import is seen as late."""
    found = {(e.importer, e.imported) for e in EDGES}
    assert ("harness.train.rl.step", "harness.objective") in found
    assert ("harness.train.rl.step", "harness.train.core.scoring") in found
    assert ("harness.probes.engine", "harness.train.core.scoring") in found  # the probes score as the trainer
    assert len(MODULES) > 100


# ----------------------------------------------------------------------------- the checks can fail

FAKE = {
    "harness/__init__.py": "",
    "harness/objective/__init__.py": "from harness.objective import policy\n",
    # up: the objective reaches for the RL trainer
    "harness/objective/policy.py": "from harness.train.rl.step import RLTrainer\n",
    "harness/train/__init__.py": "",
    "harness/train/core/__init__.py": "",
    # up, hidden in a function; and a cycle with the RL step that only the late import closes
    "harness/train/core/scoring.py": (
        "import torch\n\n\ndef score():\n    import transformers  # heavy: allowed\n"
        "    from harness.train.rl import step\n    return step\n"
    ),
    "harness/train/rl/__init__.py": "",
    "harness/train/rl/step.py": "from harness.train.core import scoring\nfrom harness import objective\n\n\nclass RLTrainer: ...\n",
    # sideways: diagnostics may not use the DPO trainer
    "harness/train/diagnostics/__init__.py": "from ..dpo import step\n",
    "harness/train/dpo/__init__.py": "",
    "harness/train/dpo/step.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from harness.train.run import shell\n",
    "harness/train/run/__init__.py": "",
    "harness/train/run/shell.py": "from harness.train.dpo.step import *\n",
}


def _fake_package(tmp_path: Path) -> tuple[list[Edge], list]:
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return _edges(package_modules(tmp_path / "harness"))


def test_the_checks_fail_on_imports_against_the_layers(tmp_path):
    edges, _ = _fake_package(tmp_path)
    bad = against_layers(edges)
    assert any(b.startswith("harness/objective/policy.py:1 imports harness.train.rl.step: up") for b in bad), bad
    assert any(b.startswith("harness/train/core/scoring.py:6 imports harness.train.rl.step: up") for b in bad), bad
    assert any(
        b.startswith("harness/train/diagnostics/__init__.py:1 imports harness.train.dpo.step: sideways") for b in bad
    ), bad
    # under TYPE_CHECKING is an edge too (up: dpo -> run)
    assert any(b.startswith("harness/train/dpo/step.py:4 imports harness.train.run.shell: up") for b in bad), bad
    assert len(bad) == 4, bad


def test_the_checks_fail_on_cycles(tmp_path):
    edges, _ = _fake_package(tmp_path)
    cycles, detail = module_cycles(edges)
    assert any({"harness.train.core.scoring", "harness.train.rl.step"} <= set(c) for c in cycles), cycles
    assert "harness/train/core/scoring.py:6 imports harness.train.rl.step (inside a function)" in detail
    # dpo.step -> run.shell is under TYPE_CHECKING: no module cycle with run.shell -> dpo.step
    assert not any("harness.train.run.shell" in c for c in cycles), cycles
    units, _ = unit_cycles(edges)
    assert any({"harness.train.core", "harness.train.rl"} <= set(c) for c in units), units
    assert ["harness.train.dpo", "harness.train.run"] in units, units  # units count every edge
    # inside a package, the imports under TYPE_CHECKING count: dpo.step -> run.shell -> dpo.step is a cycle
    inside, detail = package_cycles(edges, "harness.train")
    assert ["harness.train.dpo.step", "harness.train.run.shell"] in inside, inside
    assert "harness/train/dpo/step.py:4 imports harness.train.run.shell (under TYPE_CHECKING)" in detail
    assert package_cycles(edges, "harness.train.dpo") == ([], [])  # only the package's own modules


def test_the_checks_fail_on_a_harness_import_inside_a_function(tmp_path):
    _, late = _fake_package(tmp_path)
    assert [(_shown(p), line, text) for p, line, text in late] == [
        ("harness/train/core/scoring.py", 6, "from harness.train.rl import step")
    ]  # transformers is allowed
