"""Figure helpers used by the notebooks: one style, PDF and PNG output.

Notebooks load result tables and call these; they compute nothing a rule should.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt
import seaborn as sns

from commsched.errors import CommschedError

__all__ = ["check_figure_inputs", "save_figure", "setup_style"]


def setup_style() -> None:
    """The papers' look: white grid, colourblind palette, small serif-free fonts."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 150, "savefig.bbox": "tight", "pdf.fonttype": 42})


def save_figure(fig: plt.Figure, stem: str | os.PathLike[str]) -> list[Path]:
    """Save ``fig`` as ``<stem>.pdf`` and ``<stem>.png``; return both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".pdf"), stem.with_suffix(".png")]
    for p in paths:
        fig.savefig(p)
    return paths


def check_figure_inputs(what: str, tables: Mapping[str, str], figure: str, hint: str) -> None:
    """Check a notebook's parameters before plotting: one-line errors, nothing drawn.

    Every non-empty path in ``tables`` must exist (``hint`` says which rule makes it) and
    ``figure`` must be the PDF path (the PNG is written beside it).
    """
    for name, path in tables.items():
        if path and not Path(path).is_file():
            raise CommschedError(f"{what} figure: {name} {path!r} does not exist; {hint}")
    if Path(figure).suffix != ".pdf":
        raise CommschedError(
            f"{what} figure: figure {figure!r} must end in .pdf (the PNG is written beside it)"
        )
