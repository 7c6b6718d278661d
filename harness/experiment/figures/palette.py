"""One colour and one marker per arm of a study, the same in every figure and every process: an arm's
colour is its place in the study's arm list (cells.json order, then the probe's arms), looked up in a
qualitative palette (tab10, ten distinct colours; tab20 past ten arms), never a hash."""

from __future__ import annotations

from harness.experiment.figures.style import MARKERS

TAB10 = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
# tab20: each tab10 colour and its light partner, so that 11..20 arms stay distinct
TAB20_LIGHT = (
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
)


def arm_palette(arms: list[str]) -> dict[str, str]:
    """arm -> colour for the arms in order (duplicates keep their first place): tab10 for up to
    ten arms, the twenty colours of tab20 (tab10's then their light partners) for up to twenty,
    repeating past twenty."""
    order = list(dict.fromkeys(arms))
    colors = TAB10 if len(order) <= len(TAB10) else TAB10 + TAB20_LIGHT
    return {arm: colors[i % len(colors)] for i, arm in enumerate(order)}


def arm_marker(arms: list[str], arm: str) -> str:
    """The arm's marker: its place in the arm list, in MARKERS (with the colour it tells lines apart)."""
    order = list(dict.fromkeys(arms))
    return MARKERS[order.index(arm) % len(MARKERS)]


def study_arms(cells: list[dict], axes: list[str], probe_arms: list[str]) -> list[str]:
    """A study's arm labels in a fixed order: each non-seed axis's values on their own (what a figure
    grouping by one axis draws, so they take the palette's first colours), then the full label of each
    cell over those axes (as StudyData.by joins them, when there are several), then the probe's arms;
    each once, in cells.json order."""
    names = [a for a in axes if a != "seed"] or sorted({a for c in cells for a in c["axes"] if a != "seed"})
    out = [str(c["axes"].get(a)) for a in names for c in cells]
    if len(names) > 1:
        out += [" / ".join(str(c["axes"].get(a)) for a in names) for c in cells]
    return list(dict.fromkeys(out + [str(a) for a in probe_arms]))
