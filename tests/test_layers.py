"""The package's layers point only down, and no function-local import dodges a cycle.

The layers, bottom to top (README, "The library"):

0. leaves: ``errors``, ``progress``
1. the writer: ``atomic`` (atomic writes and the one check of an output path)
2. the shared input checks: ``validation`` (decoding, numbers in range, bounds, flag types)
3. shared helpers: ``registry`` (one per algorithm family), ``results`` (tables with
   provenance), ``paths`` (the repository root, for notebooks run from any folder)
4. the model: ``model`` (the op graph and the traced-graph accessors); ``plotting`` (the
   notebooks' figure helpers, on ``paths`` and ``results``)
5. file formats: ``io``
6. generic engines and cost models: ``sim``, ``cost``, ``trace``, ``cluster``
7. communication views of a trace: ``views``
8. the experiment skeleton: ``driver``
9. one package per work, each owning its simulator, experiments and live glue:
   ``tictac``, then ``pace`` (which ports TicTac as a baseline policy), ``echelon``,
   ``placement``
10. the claims table: ``claims``
11. the front doors, each above the one before: ``commands``, ``cli``, ``__main__``;
    beside ``commands``, ``explore`` (the notebooks' paper-vs-ours rows, on ``claims``)

A module may import its own top-level package and anything in a lower layer. Within
layer 9 a work may import only the works listed before it in :data:`WORK_ORDER`.
A ``commsched`` import inside a function is allowed only in ``commands/`` (start-up speed
of the CLI); heavy third-party imports (TensorFlow, PyTorch) may stay lazy anywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "commsched"

LAYERS: dict[str, int] = {
    "__init__": 0, "errors": 0, "progress": 0,
    "atomic": 1,
    "validation": 2,
    "registry": 3, "results": 3, "paths": 3,
    "model": 4, "plotting": 4,
    "io": 5,
    "sim": 6, "cost": 6, "trace": 6, "cluster": 6,
    "views": 7,
    "driver": 8,
    "tictac": 9, "pace": 9, "echelon": 9, "placement": 9,
    "claims": 10, "explore": 11, "commands": 11, "cli": 12, "__main__": 13,
}
#: Works may import works listed before them (PACE runs TicTac's order as a baseline).
WORK_ORDER = ("tictac", "pace", "echelon", "placement")


def _top(module: str) -> str:
    """``commsched.pace.sim`` -> ``pace``; ``commsched`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> list[tuple[str, Path]]:
    out = []
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        out.append((name.removesuffix(".__init__"), p))
    return out


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """Every ``commsched`` import of a file: (module, line, inside a function)."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.Import):
                found.extend((a.name, ch.lineno, local) for a in ch.names
                             if a.name.split(".")[0] == "commsched")
            elif isinstance(ch, ast.ImportFrom) and ch.level == 0 and ch.module \
                    and ch.module.split(".")[0] == "commsched":
                if ch.module == "commsched":  # `from commsched import x`: x is a subpackage
                    found.extend((f"commsched.{a.name}", ch.lineno, local) for a in ch.names)
                else:
                    found.append((ch.module, ch.lineno, local))
            visit(ch, local or isinstance(ch, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def _violations() -> list[str]:
    bad = []
    for name, path in _modules():
        me = _top(name)
        assert me in LAYERS, f"{name}: top-level package {me!r} has no layer in this test"
        for target, line, local in _imports(path):
            where = f"{path.relative_to(SRC.parent)}:{line}"
            if target == "commsched.__version__":
                target = "commsched"
            it = _top(target)
            if local and me != "commands":
                bad.append(f"{where}: function-local import of {target}")
            if it == me:
                continue
            if it not in LAYERS:
                bad.append(f"{where}: {target} is not a known package")
            elif LAYERS[it] > LAYERS[me]:
                bad.append(f"{where}: {name} (layer {LAYERS[me]}) imports up into "
                           f"{target} (layer {LAYERS[it]})")
            elif LAYERS[it] == LAYERS[me] and (
                    me not in WORK_ORDER or WORK_ORDER.index(it) > WORK_ORDER.index(me)):
                bad.append(f"{where}: {name} imports its sibling {target} of the same layer")
    return bad


def test_imports_point_down() -> None:
    bad = _violations()
    assert not bad, "\n".join(bad)


def test_every_package_has_a_layer() -> None:
    tops = {_top(name) for name, _ in _modules()}
    assert tops <= set(LAYERS), sorted(tops - set(LAYERS))


@pytest.mark.parametrize("source, message", [
    ("from commsched.pace import plan\n", "imports up"),
    ("def f():\n    from commsched.model import graph\n", "function-local"),
    ("from commsched.cluster import procs\n", "sibling"),
])
def test_the_check_catches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                           message: str) -> None:
    """The checker itself fails on an upward, a local and a sibling import (a planted
    module in a copy of the sim package's layer)."""
    fake = tmp_path / "commsched"
    (fake / "sim").mkdir(parents=True)
    (fake / "sim" / "bad.py").write_text(source)
    monkeypatch.setattr(f"{__name__}.SRC", fake)
    assert any(message in v for v in _violations())


def _library_map() -> str:
    readme = (SRC.parents[1] / "README.md").read_text()
    start = readme.index("## The library")
    block = readme[readme.index("```\nsrc/commsched/", start):]
    return block[4:block.index("\n```", 4)]


def test_readme_library_map_matches_the_tree() -> None:
    """Every package and top-level module is in the README's library map, every file the
    map names exists, and the map lists the packages in layer order."""
    entries = [line.split()[0] for line in _library_map().splitlines()[1:]
               if line.startswith("  ") and not line.startswith("   ")]
    tops = sorted({p.relative_to(SRC).parts[0] for p in SRC.glob("*")
                   if (p.is_dir() and (p / "__init__.py").exists())
                   or (p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py"))})
    named = sorted(e.rstrip("/") for e in entries)
    assert named == tops, (named, tops)
    layers = [LAYERS[e.rstrip("/").removesuffix(".py")] for e in entries]
    assert layers == sorted(layers), list(zip(entries, layers, strict=True))
    for line in _library_map().splitlines():
        for word in line.replace(",", " ").replace(";", " ").replace("(", " ").split():
            if word.endswith(".py:") or word.endswith(".py"):
                name = word.rstrip(":")
                hits = list(SRC.rglob(name))
                assert any(h.exists() for h in hits), f"README map names {name}, not in src"
