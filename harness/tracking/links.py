"""The MLflow link a person opens: a study's runs table, printed last so it is the line to copy.

    python -m harness.tracking.links --study demo/cpu             after `make demo`: the study's link
    python -m harness.tracking.links --study demo/cpu --all       `make mlflow-ui`: every experiment's
                                                                  link, then the study's (the server's log follows)

MLflow's bare address opens its GenAI home page (Tracing, Prompts, AI Gateway), where no study
shows; the link of `view_url` opens the study's runs in the model-training view, grouped by
variant (harness/tracking/experiment.py). The store is MLFLOW_TRACKING_URI, else
results/mlflow.db (what `make demo` writes); with an http(s) store the links point at that server.
"""

from __future__ import annotations

import argparse
import sys

from harness.tracking.experiment import VIEW_TAG, ui_links, view_url
from harness.tracking.store import client_for, default_tracking_uri, retry_locked

LOCAL_UI = "http://127.0.0.1:5000"  # where `make mlflow-ui` serves by default


def study_link(client, experiment: str, base: str) -> str | None:
    """The link to `experiment`'s runs table (its saved view where it has one); None when the store lacks it."""
    exp = retry_locked(client.get_experiment_by_name, experiment)
    if exp is None:
        return None
    return view_url(base, exp.experiment_id, VIEW_TAG in exp.tags)


def link_lines(client, experiment: str, base: str, every: bool = False) -> list[str]:
    """What to print: every experiment's link (with `every`), then the study's line last."""
    lines = ui_links(client, base) if every else []
    link = study_link(client, experiment, base)
    if link is None:
        lines.append(f"No experiment '{experiment}' in the store yet (run `make demo`); every run: {base}")
    else:
        lines.append(f"Open the study '{experiment}' (runs grouped by variant): {link}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.tracking.links", description=__doc__.splitlines()[0])
    p.add_argument("--study", required=True, help="the study's experiment name, <study>/<scale> (e.g. demo/cpu)")
    p.add_argument("--store", default=None, help="tracking URI (default: MLFLOW_TRACKING_URI, else results/mlflow.db)")
    p.add_argument("--base", default=None, help=f"the UI's address (default: an http store's, else {LOCAL_UI})")
    p.add_argument("--all", action="store_true", help="every experiment's link first")
    args = p.parse_args(argv)
    uri = args.store or default_tracking_uri()
    base = args.base or (uri if uri.startswith(("http://", "https://")) else LOCAL_UI)
    client, _ = client_for(uri)
    print("\n".join(link_lines(client, args.study, base, args.all)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
