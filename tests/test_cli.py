"""Contract of the ``commsched`` command: every listed subcommand builds its parser and
prints its help; the table's help lines are the modules' own; the top-level help and a
small ``validate`` import only what they need (the times are in benchmarks/bench_cli.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from commsched.cli import COMMANDS, build_parser, main

SRC = str(Path(__file__).resolve().parent.parent / "src")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_subcommand_prints_its_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: commsched {name}")


def test_table_help_lines_are_the_modules_own():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {a.dest: a.help for a in sub._choices_actions} == COMMANDS


def test_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for name, help_line in COMMANDS.items():
        assert name in out and help_line.split()[0] in out


def test_unknown_subcommand_names_the_choices(capsys):
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and err.count("\n") == 1


def _modules_after(argv: list[str]) -> set[str]:
    code = ("import sys, json\nfrom commsched.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": SRC}, timeout=60, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_help_and_validate_import_only_what_they_need(tmp_path):
    top = _modules_after(["--help"])
    assert not {m for m in top if m.startswith("commsched.commands.")}
    assert not {"networkx", "numpy", "jsonschema", "pandas", "tensorflow"} & top
    g = tmp_path / "g.json"
    assert main(["generate", "par", "--n", "2", "-o", str(g)]) == 0
    val = _modules_after(["validate", str(g)])
    assert {m for m in val if m.startswith("commsched.commands.")} == {
        "commsched.commands.validate"}
    assert not {"jsonschema", "pandas", "tensorflow", "yaml"} & val
