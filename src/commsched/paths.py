"""Where the repository is: paths that mean the same from any working directory.

The pipeline names every file relative to the repository root (``results/tables/...``),
while Jupyter starts a notebook's kernel in the notebook's own folder (``notebooks/`` or
``results/notebooks/``). Every notebook resolves its parameters with :func:`repo_path`,
and writes its figure with :func:`figure_path`: where the pipeline passes an output path,
there; when a researcher re-runs it by hand, in the scratch folder
``results/scratch/``, so a re-run never overwrites the pipeline's own figures.

The root is, first found: the environment variable ``COMMSCHED_ROOT``; the nearest folder
at or above the working directory holding ``Snakefile`` and ``papers/claims``; the checkout
this package was imported from (an editable install).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from commsched.errors import CommschedError

__all__ = ["SCRATCH", "figure_path", "is_root", "repo_path", "repo_root"]

#: Interactive re-runs of the notebooks write here (relative to the root).
SCRATCH = Path("results") / "scratch"


def is_root(folder: Path) -> bool:
    """Whether ``folder`` is a commsched checkout (a ``Snakefile`` and ``papers/claims``)."""
    return (folder / "Snakefile").is_file() and (folder / "papers" / "claims").is_dir()


@cache
def _root(cwd: Path, env: str | None) -> Path:
    if env:
        root = Path(env).expanduser().resolve()
        if not is_root(root):
            raise CommschedError(f"COMMSCHED_ROOT={env!r} is not a commsched checkout "
                                 "(no Snakefile and papers/claims there)")
        return root
    for folder in (cwd, *cwd.parents):
        if is_root(folder):
            return folder
    installed = Path(__file__).resolve().parents[2]
    if is_root(installed):
        return installed
    raise CommschedError(f"no commsched checkout at or above {cwd} and none around the "
                         "installed package; set COMMSCHED_ROOT to the repository's folder")


def repo_root() -> Path:
    """The repository root (see the module docstring for the search order).

    Returns
    -------
    Path
        An absolute path.

    Raises
    ------
    CommschedError
        No checkout found, or ``COMMSCHED_ROOT`` names a folder that is not one.
    """
    return _root(Path.cwd().resolve(), os.environ.get("COMMSCHED_ROOT"))


def repo_path(path: str | os.PathLike[str]) -> str:
    """``path`` resolved against the repository root (an absolute path stays as it is).

    An empty string stays empty (a notebook's optional input left out).

    Examples
    --------
    >>> repo_path("/tmp/x.csv")
    '/tmp/x.csv'
    >>> repo_path("results/tables/toys_makespans.csv") == str(
    ...     repo_root() / "results/tables/toys_makespans.csv")
    True
    """
    if not str(path):
        return ""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else repo_root() / p)


def figure_path(figure: str | os.PathLike[str], name: str) -> str:
    """The PDF a notebook writes: ``figure`` resolved against the root when the pipeline
    passes one, else ``results/scratch/<name>.pdf`` (an interactive re-run).

    Parameters
    ----------
    figure : str or PathLike
        The notebook's ``figure`` parameter; empty for "not given".
    name : str
        The figure's stem in the scratch folder (``toys_makespan``).

    Returns
    -------
    str
        An absolute path ending in ``.pdf`` when ``figure`` is empty.
    """
    if str(figure):
        return repo_path(figure)
    return str(repo_root() / SCRATCH / f"{name}.pdf")
