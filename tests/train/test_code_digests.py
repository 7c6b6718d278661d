"""The cache keys' code digests cover the code they stand for (harness/machine.py code_digest): a module that a
backend or the dataset task imports from its own package computes what the cached eval or warm start holds, so it
enters the digest; a change to it (a sampler, a row's checks, the scoring) is a new key, not a stale cache hit."""

import ast
import inspect
from pathlib import Path

import pytest

from harness.tasks import task_code
from harness.train.run.eval_cache import _BACKEND_MODULES, EVAL_MODULES
from harness.train.run.warmstart import SFT_MODULES

ROOT = Path(__file__).resolve().parents[2]


def imported(module: str, package: str) -> set[str]:
    """`module` and every module of `package` it imports, directly or through another of them (read with ast)."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((ROOT / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            todo += [
                n for n in names if n.startswith(package + ".") and (ROOT / (n.replace(".", "/") + ".py")).exists()
            ]
    return seen


def covered(modules) -> set[str]:
    """The module names a code_digest of `modules` reads (a class: the modules of its package bases)."""
    out = set()
    for m in modules:
        out |= (
            {m} if isinstance(m, str) else {c.__module__ for c in inspect.getmro(m) if c.__module__[:8] == "harness."}
        )
    return out


@pytest.mark.parametrize("backend", sorted(_BACKEND_MODULES))
def test_the_eval_digest_covers_the_backends_modules(backend):
    mods = _BACKEND_MODULES[backend]
    missing = imported(mods[0], "harness.rollout") - set(EVAL_MODULES) - set(mods)
    assert not missing, f"the eval cache's digest of rollout.backend={backend} misses {sorted(missing)}"


def test_the_warm_start_digest_covers_the_hf_backend():
    missing = imported("harness.rollout.hf", "harness.rollout") - set(SFT_MODULES)
    assert not missing, f"the warm start's digest misses {sorted(missing)}"


def test_the_dataset_task_digest_covers_its_package():
    missing = imported("harness.tasks.dataset.task", "harness.tasks.dataset") - covered(task_code("dataset"))
    assert not missing, f"the dataset task's digest misses {sorted(missing)}"
