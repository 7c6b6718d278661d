"""Every analysis script opens as a notebook (what `make notebooks` relies on): jupytext reads it as a
valid nbformat notebook of markdown and code cells, and writing that notebook back (what saving in
JupyterLab does) gives the same script, apart from the version stamp jupytext adds to the header."""

from __future__ import annotations

import json

import jupytext
import nbformat
import pytest
from study_helpers import REPO

SCRIPTS = sorted((REPO / "analysis").glob("*.py"))
STAMP = ("#       format_version:", "#       jupytext_version:")


def _without_stamp(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(STAMP))


def test_every_analysis_script_is_listed():
    assert {p.stem for p in SCRIPTS} >= {
        "demo",
        "length_bias",
        "difficulty_bias",
        "moe_stability",
        "dpo_displacement",
        "clip_higher",
        "passk",
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_converts_to_a_notebook(script):
    text = script.read_text()
    nb = jupytext.reads(text, fmt="py:percent")
    nbformat.validate(nb)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds[0] == "markdown" and nb.cells[0].source.startswith("# ")  # opens on its title
    assert kinds.count("code") >= 2 and kinds.count("markdown") >= 2
    assert nb.metadata["kernelspec"]["name"] == "python3"
    ipynb = nbformat.writes(nb)  # the .ipynb a researcher could save
    assert json.loads(ipynb)["cells"][0]["cell_type"] == "markdown"
    assert _without_stamp(jupytext.writes(nb, fmt="py:percent")) == _without_stamp(text)


def test_jupyterlab_opens_python_files_as_notebooks():
    """make notebooks installs this as JupyterLab's overrides.json: a double-click opens the notebook."""
    overrides = json.loads((REPO / "analysis" / "jupyterlab_overrides.json").read_text())
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == "Jupytext Notebook"
