"""Every public function of the algorithm packages carries a numpydoc signature block.

Issue 20, item 3: the public functions of the model, the generic engines, the cost models
and the four works document each parameter (``Parameters``) and what they return
(``Returns`` or ``Yields``), as networkx's ``algorithms/dag.py`` does. This test reads the
sources with :mod:`ast` (nothing is imported, so no TensorFlow) and checks, for every public
module-level function and every public method of a public module-level class that takes
arguments (``self`` and ``cls`` not counted):

- its docstring has a ``Parameters`` section naming exactly its parameters, in any order
  (``*args`` and ``**kwargs`` spelled with their stars, as numpydoc does);
- it has a ``Returns`` or ``Yields`` section unless its return annotation is ``None``
  (or ``NoReturn``/``Never``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "commsched"

#: The packages whose public functions must carry numpydoc sections.
PACKAGES = ("model", "sim", "cost", "tictac", "pace", "echelon", "placement")

_NO_RETURN = {"None", "NoReturn", "Never"}
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*\*{0,2}[A-Za-z_][A-Za-z0-9_]*)*)"
                    r"\s*(?::.*)?$")


def _sections(doc: str) -> dict[str, list[str]]:
    """``{header: lines}`` of a cleaned docstring's numpydoc sections (underlined headers)."""
    lines = doc.splitlines()
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and nxt.strip() and set(nxt.strip()) == {"-"} \
                and len(nxt.strip()) >= len(line.strip()):
            current = out.setdefault(line.strip(), [])
            i += 2
            continue
        if current is not None:
            current.append(line)
        i += 1
    return out


def _documented(lines: list[str]) -> list[str]:
    """The names a ``Parameters`` section lists (entries start at column 0)."""
    names: list[str] = []
    for line in lines:
        if not line.strip() or line[0].isspace():
            continue
        m = _ENTRY.match(line.strip())
        if m:
            names += [n.strip() for n in m.group(1).split(",")]
    return names


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool = False) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if method and names and names[0] in ("self", "cls"):
        names = names[1:]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return names


def _modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((SRC / pkg).rglob("*.py")):
            rel = path.relative_to(SRC.parent).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            elif parts[-1].startswith("_"):
                continue
            out.append((".".join(parts), path))
    return out


def _problems(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool = False) -> list[str]:
    doc = ast.get_docstring(fn) or ""
    sections = _sections(doc)
    wanted = _params(fn, method)
    problems = []
    if "Parameters" not in sections:
        problems.append("no Parameters section")
    else:
        listed = _documented(sections["Parameters"])
        missing = [p for p in wanted if p not in listed]
        extra = [p for p in listed if p not in wanted]
        if missing:
            problems.append(f"Parameters lacks {', '.join(missing)}")
        if extra:
            problems.append(f"Parameters lists {', '.join(extra)}, not in the signature")
    ret = fn.returns
    returns_none = ret is not None and ast.unparse(ret).strip("'\"") in _NO_RETURN
    if not returns_none and not {"Returns", "Yields"} & sections.keys():
        problems.append("no Returns (or Yields) section")
    return problems


def test_sections_parser() -> None:
    doc = ("Sum.\n\nParameters\n----------\nx, y : int\n    Two.\n*args\n    More.\n"
           "\nReturns\n-------\nint\n")
    s = _sections(doc)
    assert _documented(s["Parameters"]) == ["x", "y", "*args"]
    assert "Returns" in s

    src = "def f(a, *rest, b=1, **kw) -> int:\n    '''Only a summary.'''\n"
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert _params(fn) == ["a", "b", "*rest", "**kw"]
    method = ast.parse("def m(self, x) -> None:\n    pass\n").body[0]
    assert isinstance(method, ast.FunctionDef)
    assert _params(method, method=True) == ["x"]
    assert _problems(method, method=True) == ["no Parameters section"]
    assert _problems(fn) == ["no Parameters section", "no Returns (or Yields) section"]


def _public(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not n.name.startswith("_")]


def test_public_functions_have_numpydoc_sections() -> None:
    offenders = []
    for module, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in _public(tree.body):
            if _params(fn):
                offenders += [f"{module}:{fn.name}: {p}" for p in _problems(fn)]
        for cls in tree.body:
            if not isinstance(cls, ast.ClassDef) or cls.name.startswith("_"):
                continue
            for fn in _public(cls.body):
                if _params(fn, method=True):
                    offenders += [f"{module}:{cls.name}.{fn.name}: {p}"
                                  for p in _problems(fn, method=True)]
    assert not offenders, (f"{len(offenders)} numpydoc problems:\n" + "\n".join(offenders))
