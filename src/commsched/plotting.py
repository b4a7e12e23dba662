"""Figure helpers used by the notebooks: one style, PDF and PNG output, the figure inline.

Notebooks load result tables and call these; they compute nothing a rule should. No
backend is chosen here: a headless run gets ``MPLBACKEND=agg`` from its rule, a Jupyter
kernel keeps its inline backend, and :func:`save_figure` shows the saved PNG as the cell's
image output under either.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython import get_ipython
from IPython.display import Image, display

from commsched.errors import CommschedError
from commsched.paths import repo_root

__all__ = ["check_figure_inputs", "legend_below", "save_figure", "select", "setup_style",
           "styles"]

#: Markers and dash patterns that stay apart in grey and in a colourblind palette.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h", "p")
DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)))


def setup_style() -> None:
    """The papers' look: white grid, colourblind palette, small serif-free fonts."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 150, "savefig.bbox": "tight", "pdf.fonttype": 42})


def styles(names: Sequence[str], emphasise: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """One distinct line style per name: colour, marker and dash pattern all differ between
    neighbours, so lines stay apart where hues are close (ten policies, print in grey).

    Parameters
    ----------
    names : sequence of str
        The series in legend order.
    emphasise : sequence of str
        Series drawn thick and solid (a paper's own method and baselines); the others are
        thinner and dashed.

    Returns
    -------
    dict
        ``{name: keyword arguments of Axes.plot}`` (``color``, ``marker``, ``linestyle``,
        ``linewidth``, ``markersize``).
    """
    palette = sns.color_palette("colorblind", max(len(names), 1))
    dashes = itertools.cycle(DASHES[1:] if emphasise else DASHES)
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        main = name in emphasise
        out[name] = {"color": palette[i % len(palette)], "marker": MARKERS[i % len(MARKERS)],
                     "linestyle": "-" if main else next(dashes),
                     "linewidth": 1.8 if main else 1.0, "markersize": 4.5 if main else 3.5}
    return out


def legend_below(fig: plt.Figure, handles: Sequence[Any] | None = None,
                 labels: Sequence[str] | None = None, ncol: int | None = None,
                 title: str | None = None) -> None:
    """One legend for the whole figure, below every panel, so that it never covers data.

    Without ``handles`` it collects, each label once, the entries of every axes' legend
    (seaborn draws its own) or else the axes' labelled artists.
    """
    if handles is None:
        seen: dict[str, Any] = {}
        for ax in fig.axes:
            leg = ax.get_legend()
            pairs = (zip(leg.legend_handles, [t.get_text() for t in leg.get_texts()],
                         strict=True) if leg is not None
                     else zip(*ax.get_legend_handles_labels(), strict=True))
            for h, lab in pairs:
                seen.setdefault(lab, h)
        labels, handles = list(seen), list(seen.values())
    assert labels is not None
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            leg.remove()
    n = len(labels)
    ncol = ncol or min(n, 5)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
               frameon=False, fontsize="small", title=title, title_fontsize="small")


def save_figure(fig: plt.Figure, stem: str | os.PathLike[str]) -> list[Path]:
    """Save ``fig`` as ``<stem>.pdf`` and ``<stem>.png``, show the PNG as the cell's output
    (in a Jupyter or papermill kernel, whatever the backend), and close the figure.

    Returns
    -------
    list of Path
        The PDF and the PNG.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".pdf"), stem.with_suffix(".png")]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    if get_ipython() is not None:
        display(Image(filename=str(paths[1])))
    return paths


def select(df: pd.DataFrame, column: str, values: Sequence[Any], what: str) -> pd.DataFrame:
    """The rows of ``df`` whose ``column`` is one of ``values`` (a notebook's knob, e.g. the
    models to draw; one string is one value); all rows when ``values`` is empty.

    Raises
    ------
    CommschedError
        A value the table does not have (one line naming them and the values it has).
    """
    if not values:
        return df
    if isinstance(values, str):  # one name given as a string (papermill -p models vgg16)
        values = [values]
    have = list(dict.fromkeys(df[column]))
    unknown = [v for v in values if v not in have]
    if unknown:
        raise CommschedError(f"{what}: {column} {', '.join(map(str, unknown))} not in the "
                             f"table (it has {', '.join(map(str, have))})")
    return df[df[column].isin(list(values))]


def check_figure_inputs(what: str, tables: Mapping[str, str], figure: str, hint: str) -> None:
    """Check a notebook's parameters before plotting: one-line errors, nothing drawn.

    Every non-empty path in ``tables`` must exist and ``figure`` must be the PDF path (the
    PNG is written beside it). A missing table is named with the path that was looked up
    and the Snakemake command that makes it (its path relative to the repository root),
    then ``hint`` (which target makes it).
    """
    for name, path in tables.items():
        if path and not Path(path).is_file():
            raise CommschedError(f"{what} figure: {name} {path!r} does not exist; "
                                 f"{_make_hint(path)} ({hint})")
    if Path(figure).suffix != ".pdf":
        raise CommschedError(
            f"{what} figure: figure {figure!r} must end in .pdf (the PNG is written beside it)"
        )


def _make_hint(path: str) -> str:
    """``make it with `snakemake --cores 1 <rel>` in <root>``, or a plain note when the
    path is outside the checkout."""
    try:
        root = repo_root()
    except CommschedError:
        return "no commsched checkout found to make it in"
    p = Path(path)
    p = p if p.is_absolute() else root / p  # the pipeline's paths are root-relative
    try:
        rel = p.resolve().relative_to(root)
    except ValueError:
        return f"it is outside the checkout {root}"
    return f"make it with `snakemake --cores 1 {rel}` in {root}"
