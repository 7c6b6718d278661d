"""Every report says near its top what kind of finding it holds: "Exploratory:" (no hypotheses committed as
tests before its runs: its intervals are descriptive) or "Confirmatory:" (hypotheses committed in the study
file before its first cell ran), so that no reader takes a descriptive interval for a tested claim."""

from pathlib import Path

import pytest

REPORTS = Path(__file__).resolve().parents[2] / "analysis" / "reports"
PAGES = sorted(p for p in REPORTS.glob("*.md") if p.name != "README.md")  # a folder holds a report's figures or cells


def standing(page: Path) -> list[str]:
    """The standing lines among the page's first 12 lines."""
    head = page.read_text().splitlines()[:12]
    return [line for line in head if line.startswith(("Exploratory:", "Confirmatory:"))]


def test_the_reports_are_found():
    assert len(PAGES) >= 10, PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_report_says_its_standing_once(page):
    assert len(standing(page)) == 1, f"{page}: begin with one 'Exploratory:' or 'Confirmatory:' line"
