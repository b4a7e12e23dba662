"""TicTac Sec. 6 toys experiment, `commsched generate`, and the toys pipeline rules."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commsched.cli import main as cli
from commsched.errors import CommschedError
from commsched.model.graph import load, new_graph
from commsched.results import read_metrics, read_provenance, read_table
from commsched.tictac.experiments.toys import (
    FigureConfig,
    main,
    order_makespan,
    run_toys,
    toy_metrics,
)
from commsched.trace.synthetic import layer_order, par_n, seq_n

ROOT = Path(__file__).resolve().parents[1]


def test_run_toys_small():
    graphs = {"par4": par_n(4), "seq4": seq_n(4)}
    df = run_toys(graphs, random_orders=200, seed=1)
    assert set(df.order_kind) == {"best", "reversed", "random"}
    assert len(df) == 2 * (200 + 2)
    m = toy_metrics(df)
    # Par-4: every order gives 4 + 1 = 5.
    assert m["toys.par4.best_makespan"] == 5.0
    assert m["toys.par4.frac_orders_optimal"] == 1.0
    assert m["toys.par4.worst_over_best"] == 1.0
    # Seq-4: best 5, reversed 2 * 4 = 8; one of 4! = 24 orders is best, so about 1/24 of
    # 200 random orders (binomial: mean 8.3, sd 2.8) reach 5.
    assert m["toys.seq4.best_makespan"] == 5.0
    assert m["toys.seq4.reversed_over_best"] == 8.0 / 5.0
    assert 0.0 < m["toys.seq4.frac_orders_optimal"] < 0.15
    assert m["toys.seq4.worst_over_best"] <= 8.0 / 5.0
    # every random order is reproducible from its seed
    assert df[df.order_kind == "random"].seed.tolist() == list(range(200)) * 2


def test_run_toys_deterministic():
    a = run_toys({"s": seq_n(6)}, random_orders=50, seed=3)
    b = run_toys({"s": seq_n(6)}, random_orders=50, seed=3)
    c = run_toys({"s": seq_n(6)}, random_orders=50, seed=4)
    assert a.equals(b) and not a.equals(c)


def test_order_makespan_matches_closed_form():
    g = seq_n(5)
    assert order_makespan(g, layer_order(g)) == 6.0
    assert order_makespan(g, layer_order(g)[::-1]) == 10.0


def test_run_toys_rejects_non_toy():
    with pytest.raises(CommschedError, match="not a toy graph"):
        run_toys({"x.json": new_graph({"cpu": 1})}, random_orders=3, seed=0)
    with pytest.raises(CommschedError, match="random_orders"):
        run_toys({"p": par_n(2)}, random_orders=0, seed=0)


def test_generate_validate_and_experiment_cli(tmp_path, capsys):
    par, seq = tmp_path / "par8.json", tmp_path / "seq8.json"
    assert cli(["generate", "par", "--n", "8", "-o", str(par)]) == 0
    assert cli(["generate", "seq", "--n", "8", "-o", str(seq)]) == 0
    assert cli(["validate", str(seq)]) == 0
    assert "16 ops, 15 edges" in capsys.readouterr().out
    assert load(seq).graph["toy"] == {"family": "seq", "n": 8}
    table, metrics = tmp_path / "t.csv", tmp_path / "m.csv"
    assert main(["--graphs", str(par), str(seq), "--random-orders", "20", "--seed", "0",
                 "--table", str(table), "--metrics", str(metrics)]) == 0
    m = read_metrics([metrics])
    assert m["toys.par8.frac_orders_optimal"][0] == 1.0
    assert m["toys.seq8.best_makespan"][0] == 9.0
    assert read_provenance(table)["config"]["random_orders"] == 20
    assert len(read_table(table)) == 2 * 22


def test_experiment_bad_graph(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["--graphs", str(bad), "--random-orders", "2", "--seed", "0",
                 "--table", str(tmp_path / "t.csv"), "--metrics", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert "invalid JSON" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.csv").exists()


def test_generate_random_cli(tmp_path):
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    args = ["generate", "random", "--levels", "12", "--seed", "5", "--speed", "2",
            "--csv", str(csv), "-o", str(out)]
    assert cli(args) == 0
    first = out.read_bytes()
    assert cli(args) == 0
    assert out.read_bytes() == first  # same seed, same bytes
    g = load(out)
    a = g.nodes[next(iter(g))]
    assert a["duration"] == a["operations"] / 2 and a["resource"] == "cpu"
    assert g.graph["generator"]["levels"] == 12
    assert csv.read_text().startswith("Id,(Outgoing) node")


@pytest.mark.parametrize("args,msg", [
    (["generate", "seq", "--n", "0"], "argument --n: must be an integer >= 1"),
    (["generate", "random", "--edge-prob", "1.5"],
     "argument --edge-prob: must be a finite number >= 0 and <= 1"),
    (["generate", "random", "--tensor-size", "9", "3"], "tensor_size must be a range"),
])
def test_generate_errors(tmp_path, capsys, args, msg):
    out = tmp_path / "x.json"
    assert cli([*args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_figure_config(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("x\n1\n")
    FigureConfig(table=str(table), figure=str(tmp_path / "f.pdf"))
    with pytest.raises(CommschedError, match="does not exist"):
        FigureConfig(table=str(tmp_path / "nope.csv"), figure=str(tmp_path / "f.pdf"))
    with pytest.raises(CommschedError, match=r"must end in \.pdf"):
        FigureConfig(table=str(table), figure=str(tmp_path / "f.png"))


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).parent / name)


@pytest.mark.slow
def test_snakemake_dry_run_toys():
    r = subprocess.run([_tool("snakemake"), "-n", "--forceall", "toys"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    for rule in ("toys_graph", "toys_simulate", "toys_figure"):
        assert f"rule {rule}:" in out or f"localrule {rule}:" in out
    jobs = json.dumps(out)
    assert "results/graphs/toys/par32.json" in jobs and "results/graphs/toys/seq32.json" in jobs
