"""Figure helpers used by the notebooks: one style, PDF and PNG output.

Notebooks load result tables and call these; they compute nothing a rule should.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt
import seaborn as sns

__all__ = ["save_figure", "setup_style"]


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
