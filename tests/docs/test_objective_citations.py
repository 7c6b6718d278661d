"""Code and docs cite docs/objective.md by its headings, never by a section number: a number breaks as soon as
the page is reordered, a heading does not. So no file names a section of it by number; every quoted
heading after `objective.md,` is one of its headings; and every `objective.md#anchor` link of the docs resolves
to one of them, by GitHub's anchor rule. The section sign is spelled as an escape here, so that this file's
own patterns are not citations."""

import re
from pathlib import Path

import pytest

from harness.experiment import metric_keys

REPO = Path(__file__).resolve().parents[2]
OBJECTIVE = (REPO / "docs" / "objective.md").read_text()
SIGN = "\u00a7"
FOLDERS = ("harness", "tests", "benchmarks", "analysis", "experiments", "docs")
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".txt", ".sh", ".ipynb", "")

# objective.md, maybe in backticks or as a markdown link, then a section sign and a number
NUMBERED = re.compile(r"objective\.md[\]()\w./#`'\"-]*[\s,]*" + SIGN + r"\s*\d")
# any section sign before a number; it is a paper's (an arXiv id shortly before it) or another page's (a .md named
# next to it), or else it is a bare number of docs/objective.md
BARE = re.compile(SIGN + r"\s*\d")
PAPER = re.compile(r"\d{4}\.\d{4,5}")
OTHER_PAGE = re.compile(r"[\w/.-]+\.md\b")
QUOTED = re.compile(r"objective\.md[`)\]]?,\s*([\"'])([^\n]+?)\1")
ANCHOR_LINK = re.compile(r"objective\.md#([\w-]+)")
LOCAL_LINK = re.compile(r"\]\(#([^)\s]+)\)")


def scanned_files() -> list[Path]:
    files = [REPO / "README.md"]
    for folder in FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return [p for p in files if p.is_file() and "__pycache__" not in p.parts]


def headings(doc: str) -> list[str]:
    """The `##` and `###` headings of `doc`, outside its code blocks."""
    out, fenced = [], False
    for line in doc.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{2,3} ", line):
            out.append(line.split(" ", 1)[1].strip())
    return out


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped except '-' and '_', spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: str) -> set[str]:
    seen: dict[str, int] = {}
    for h in headings(doc):
        a = github_anchor(h)
        seen[a if a not in seen else f"{a}-{seen[a]}"] = seen.get(a, 0) + 1
    return set(seen)


def numbered_citations(text: str) -> list[str]:
    return [m.group(0) for m in NUMBERED.finditer(text)]


def bare_numbers(text: str) -> list[str]:
    """The section numbers in `text` that are neither a paper's nor another page's."""
    out = []
    for m in BARE.finditer(text):
        before, after = text[max(0, m.start() - 60) : m.start()], text[m.end() : m.end() + 60]
        pages = [p for p in OTHER_PAGE.findall(before + " " + after) if not p.endswith("objective.md")]
        if not PAPER.search(before) and not pages:
            out.append(text[max(0, m.start() - 30) : m.end() + 5].replace("\n", " "))
    return out


FILES = scanned_files()


def test_the_scan_sees_the_project():
    names = {p.relative_to(REPO).as_posix() for p in FILES}
    assert len(FILES) > 200 and {"README.md", "docs/objective.md", "harness/objective/api.py"} <= names


def test_the_patterns_tell_a_number_from_a_paper_or_another_page():
    for cited in ("docs/objective.md " + SIGN + "6", "[objective.md](objective.md) " + SIGN + "9"):
        assert numbered_citations(cited) and bare_numbers(cited)
    assert numbered_citations("`docs/objective.md` " + SIGN + "12-13")
    assert bare_numbers("the rollout correction (" + SIGN + "6)")
    for paper in ("ScaleRL 2510.13786 " + SIGN + "3.2", "See " + SIGN + "3.2.2 in docs/algo/rollout_corr_math.md"):
        assert not bare_numbers(paper) and not numbered_citations(paper)
    assert not numbered_citations('docs/objective.md, "Batch-level knobs"')


def test_github_anchors():
    assert github_anchor("The trainer's calls") == "the-trainers-calls"
    assert github_anchor("MaxRL and pass@k") == "maxrl-and-passk"
    assert github_anchor("Surrogates and ratios of 2025-26") == "surrogates-and-ratios-of-2025-26"
    assert github_anchor("Geometric ratio (GMPO)") == "geometric-ratio-gmpo"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_file_cites_objective_md_by_section_number(path):
    text = path.read_text(errors="replace")
    hits = numbered_citations(text) + bare_numbers(text)
    assert not hits, f'cite docs/objective.md by its heading (docs/objective.md, "Advantage"), not by number: {hits}'


def test_quoted_headings_are_headings_of_objective_md():
    have = {h.lower() for h in headings(OBJECTIVE)}
    cited = {
        (m.group(2), p.relative_to(REPO).as_posix())
        for p in FILES
        for m in QUOTED.finditer(p.read_text(errors="replace"))
    }
    assert cited, "no file cites docs/objective.md by a quoted heading"
    missing = sorted((name, where) for name, where in cited if name.lower() not in have)
    assert not missing, f"quoted after objective.md but no heading of docs/objective.md: {missing}"


def test_anchor_links_to_objective_md_resolve():
    have = anchors(OBJECTIVE)
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    links = {(a, p.name) for p in pages for a in ANCHOR_LINK.findall(p.read_text())}
    links |= {(a, "objective.md") for a in LOCAL_LINK.findall(OBJECTIVE)}
    assert links, "no page links an anchor of docs/objective.md"
    broken = sorted((a, page) for a, page in links if a not in have)
    assert not broken, f"objective.md has no heading with these anchors: {broken}"


def test_the_headings_code_reads_exist():
    """The sections that code finds by heading (the metric keys, the docs contract's tables) are there, and the
    metric keys a hypothesis may name are read from them, DPO's and the RL trainer's alike."""
    for heading in ("Every knob at a glance", "Advantage", "Presets", "DPO", "Public Python API"):
        assert heading in headings(OBJECTIVE)
    keys = metric_keys.documented()
    assert {"rewards/chosen", "loss/policy", "eval/pass_at_{k}"} <= set(keys)
