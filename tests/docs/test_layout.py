"""The map matches the tree: every path the README or docs/architecture.md names exists, every package
under harness/ has a row in the README's layout table (its own or an ancestor's other than harness/ and
harness/train/, which only hold packages), every module at harness/'s top is covered by a row, and
harness/train/__init__.py's docstring names each of train's packages and nothing that is not there."""

import ast
import glob
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
README = (REPO / "README.md").read_text()
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text()
TOP = ("harness", "tests", "docs", "experiments", "analysis", "benchmarks", "profiles")


def _expand(token: str) -> list[str]:
    """`harness/{atomic,jsonl}.py` -> both paths; other tokens as they are."""
    m = re.search(r"\{([^}]*)\}", token)
    if not m:
        return [token]
    return [x for part in m.group(1).split(",") for x in _expand(token[: m.start()] + part + token[m.end() :])]


def named_paths(text: str) -> list[str]:
    """Repository paths a page names: in backticks or as a link target, starting at a top folder of the repo
    (a pattern with `<`, `*` or `...` in it, a command line or an anchor are not paths)."""
    tokens = re.findall(r"`([^`\s]+)`", text) + re.findall(r"\]\(([^)\s#]+)", text)
    out = []
    for t in tokens:
        t = t.removeprefix("./").removeprefix("../")
        if t.split("/")[0] in TOP and "/" in t and not re.search(r"[<*]|\.\.\.", t):
            out += _expand(t)
    return sorted(set(out))


def short_paths(text: str) -> list[str]:
    """Paths a page gives relative to harness/ or harness/train/ (`rl/update.py`, `objective/api.py`)."""
    found = re.findall(r"(?<![\w/.])((?:[a-z_]+/)+[a-z_]+\.py)\b", text)
    return sorted({p for p in found if p.split("/")[0] not in TOP})


PAGES = {"README.md": README, "docs/architecture.md": ARCHITECTURE}
NAMED = [(page, p) for page, text in PAGES.items() for p in named_paths(text)]
SHORT = [(page, p) for page, text in PAGES.items() for p in short_paths(text)]


def test_the_pages_name_paths():
    assert len(NAMED) > 30 and ("README.md", "harness/objective/reference_loop.py") in NAMED
    assert ("docs/architecture.md", "rl/update.py") in SHORT


@pytest.mark.parametrize("page, path", NAMED)
def test_every_named_path_exists(page, path):
    assert (REPO / path).exists(), f"{page} names {path}, which does not exist"


@pytest.mark.parametrize("page, path", SHORT)
def test_every_short_path_exists(page, path):
    assert any((base / path).exists() for base in (HARNESS, HARNESS / "train")), (
        f"{page} names {path}, found neither under harness/ nor under harness/train/"
    )


def layout_rows() -> list[str]:
    """The paths of the first column of the README's layout table."""
    table = README.split("\n## Layout", 1)[1]
    return [
        p
        for line in table.splitlines()
        if line.startswith("| `")
        for p in re.findall(r"`([^`]+)`", line.split(" | ")[0])
    ]


CONTAINERS = {"harness/", "harness/train/"}


def _packages() -> list[str]:
    found = (str(p.parent.relative_to(REPO)) + "/" for p in HARNESS.rglob("__init__.py"))
    return sorted(p for p in found if p not in CONTAINERS)


@pytest.mark.parametrize("package", _packages())
def test_every_package_is_in_the_layout(package):
    rows = {r.split(" ")[0] for r in layout_rows()}
    ancestors = {package[: i + 1] for i, c in enumerate(package) if c == "/"}
    assert (ancestors - CONTAINERS) & rows, f"{package} has no row in the README's layout table (nor an ancestor)"


@pytest.mark.parametrize("module", sorted(p.name for p in HARNESS.glob("*.py")))
def test_every_top_module_is_covered_by_a_row(module):
    covered = {Path(x).name for r in layout_rows() for x in glob.glob(str(REPO / r.split(" ")[0]))}
    assert module in covered, f"harness/{module} is not covered by a row of the README's layout table"


def test_the_layout_lists_no_missing_path():
    for row in layout_rows():
        path = row.split(" ")[0]
        assert glob.glob(str(REPO / path)), f"the README's layout names {path}, which does not exist"


def test_the_train_docstring_is_the_tree():
    doc = ast.get_docstring(ast.parse((HARNESS / "train" / "__init__.py").read_text()))
    listed = set(re.findall(r"^    ([a-z_]+)/", doc, re.M))
    have = {p.parent.name for p in (HARNESS / "train").glob("*/__init__.py")}
    assert listed == have, f"harness/train/__init__.py lists {sorted(listed)}; the tree has {sorted(have)}"
    for name in re.findall(r"(?<![/\w])([a-z_]+\.py)\b", doc):
        assert list((HARNESS / "train").rglob(name)), f"harness/train/__init__.py names {name}, not in harness/train/"
