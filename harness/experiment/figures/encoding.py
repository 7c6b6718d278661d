"""What a figure draws, said by the code that drew it: every shared drawing function records on its
panel one phrase per encoding it used ('n=3 seeds as thin lines, their mean bold', 'bar: bootstrap 95%
interval over prompts'), and the figure's subtitle is those phrases, so a subtitle cannot describe
another chart than the one below it."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.experiment.figures.data import StudyData

ATTR = "harness_encoding"  # the list of phrases kept on each matplotlib Axes
WIDTH = 150  # characters per subtitle line (a long description wraps rather than leaves the figure)


def record(ax, phrase: str) -> None:
    """Note on the panel that it draws `phrase` (each phrase once, in drawing order)."""
    phrases = ax.__dict__.setdefault(ATTR, [])
    if phrase not in phrases:
        phrases.append(phrase)


def phrases(ax) -> list[str]:
    """What the shared functions drew on the panel (record), in drawing order."""
    return list(ax.__dict__.get(ATTR, []))


def described(fig) -> str:
    """What the figure's panels drew (record), each phrase once, joined by '; ' and wrapped at WIDTH
    characters ('' when none was recorded). When panels drew differently, each panel's phrases
    are prefixed by where it sits and the panels parted by ' | ' ('left: ... | right: ...', or
    'panel 3: ...' past three columns)."""
    drawn = [(ax, phrases(ax)) for ax in fig.axes if phrases(ax)]
    groups = {tuple(p) for _, p in drawn}
    if len(groups) <= 1:
        text = "; ".join(dict.fromkeys(p for _, ps in drawn for p in ps))
    else:
        text = " | ".join(f"{_where(ax, fig)}: {'; '.join(ps)}" for ax, ps in drawn)
    return "\n".join(textwrap.wrap(text, WIDTH))


def _where(ax, fig) -> str:
    """'left' / 'middle' / 'right' for a panel of a row of up to three, else 'panel N' (reading order)."""
    spec = ax.get_subplotspec()
    if spec is not None:
        rows, cols = spec.get_geometry()[:2]
        if rows == 1 and cols <= 3:
            col = spec.colspan.start
            return {2: ("left", "right"), 3: ("left", "middle", "right")}.get(cols, ("the panel",))[col]
    return f"panel {fig.axes.index(ax) + 1}"


def suptitle(fig, data: StudyData, what: str, note: str | None = None) -> str:
    """The figure's title '<study> (<scale>): what' over `note`, else over what its panels drew
    (described), else the number of seeds; set on the figure and returned."""
    text = data.title(what, note if note is not None else (described(fig) or None))
    fig.suptitle(text)
    return text
