"""The MLflow page a person lands on: the study's link (harness/tracking/links.py, what `make demo` and
`make mlflow-ui` print last) opens the study's runs grouped by variant with the grid's axes as columns.

The slow test serves a small study's store with `mlflow server` on a free loopback port and opens the
link in headless Chromium (Debian's `chromium`; skipped without it); MLflow's UI is a React app, so the
page is read after `--virtual-time-budget` lets it render (ag-grid rows and column ids in the DOM)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.tracking.links import link_lines, main
from harness.tracking.server import start_mlflow_server, stop_mlflow_server
from harness.tracking.store import client_for
from tests.experiments.mlflow_study_store import AXES, EXPERIMENT, write_study_store

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def test_the_study_link_is_printed_last(tmp_path, capsys):
    uri, _ = write_study_store(tmp_path)
    exp_id = client_for(uri)[0].get_experiment_by_name(EXPERIMENT).experiment_id
    assert main(["--study", EXPERIMENT, "--store", uri, "--all", "--base", "http://h:5000/"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Default ")  # every experiment's link first
    assert lines[-1] == (
        f"Open the study '{EXPERIMENT}' (runs grouped by variant): "
        f"http://h:5000/#/experiments/{exp_id}/runs?workflowType=machine_learning&viewStateShareKey=harness"
    )
    missing = link_lines(client_for(uri)[0], "demo/cpu", "http://h:5000")
    assert missing == ["No experiment 'demo/cpu' in the store yet (run `make demo`); every run: http://h:5000"]


def _chromium(url: str, tmp_path, *args: str) -> str:
    """Headless Chromium on `url` with its own profile; stdout (the DOM with --dump-dom)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1600,900"]
    cmd += [f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=20000", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout


def _rendered_dom(url: str, tmp_path, wanted: str, tries: int = 3) -> str:
    """The page's DOM once `wanted` shows in it (a loaded machine may need another try to render)."""
    dom = ""
    for _ in range(tries):
        dom = _chromium(url, tmp_path, "--dump-dom")
        if wanted in dom:
            break
    return dom


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs a headless browser: apt-get install chromium")
def test_the_study_link_opens_its_runs_grouped_by_variant(tmp_path):
    uri, runs = write_study_store(tmp_path)
    proc, server = start_mlflow_server(uri, tmp_path / "artifacts", tmp_path / "server.log")
    try:
        link = link_lines(client_for(uri)[0], EXPERIMENT, server)[-1].rsplit(" ", 1)[1]
        dom = _rendered_dom(link, tmp_path, "Group: preset=")
        _chromium(link, tmp_path, f"--screenshot={tmp_path / 'study.png'}")
    finally:
        stop_mlflow_server(proc)
    for variant in sorted({c["variant"] for c in runs.values()}):
        assert f"Group: {variant}" in dom  # a group row per variant
    for run_id, cell in runs.items():
        assert f'row-id="tag.variant.{cell["variant"]}.{run_id}"' in dom  # each cell's run inside its variant
        assert cell["id"] in dom
    for axis in AXES:
        assert f'col-id="params.`{axis}`"' in dom  # the grid's axes as columns
    assert 'col-id="metrics.`result/final_pass_at_1`"' in dom
    assert (tmp_path / "study.png").read_bytes()[:4] == b"\x89PNG"
