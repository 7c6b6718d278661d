"""Where the notebooks' figures and summary go: HARNESS_FIGURES_DIR (set by `harness summarize`),
else <study dir>/figures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData


def figures_dir(data: StudyData) -> Path:
    """HARNESS_FIGURES_DIR (set by `harness summarize`), else <study dir>/figures."""
    d = Path(os.environ.get("HARNESS_FIGURES_DIR") or data.dir / "figures")
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(fig, data: StudyData, name: str) -> Path:
    """Write <figures dir>/<name>.png and close the figure."""
    path = figures_dir(data) / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    print(f"[figure] {path}")
    return path


def write_summary(data: StudyData, text: str) -> Path:
    """Print the markdown summary and keep it beside the figures (summary.md)."""
    print(text)
    path = figures_dir(data) / "summary.md"
    path.write_text(text + "\n")
    return path
