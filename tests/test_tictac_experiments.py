"""TicTac Sec. 6 experiment drivers (commsched.experiments.tictac) on tiny traces.

The traces are hand-built in the traced-graph format (data/traces/*.json.gz): a chain of
layers, each reading its own variable; in training a backward chain produces the
gradients and an optimizer op applies them (the PS view drops it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.experiments import tictac as ex
from commsched.graph import add_op, new_graph, save
from commsched.results import read_metrics, read_table
from commsched.sim import simulate
from commsched.tictac import efficiency
from commsched.views import ps_view


def _op(g: nx.DiGraph, name: str, seconds: float, op_type: str, **attrs) -> None:
    add_op(g, name, "compute", "cpu", seconds, op_type=op_type, samples=[seconds, seconds],
           out_bytes=4, is_gradient=attrs.pop("is_gradient", False), **attrs)


def tiny_trace(name: str, mode: str, layers: int = 5, batch: int = 4) -> nx.DiGraph:
    """A chain model: layer i reads w_i (bytes vary with i) and takes 1 + i % 3 ms."""
    variables = {f"w{i}": {"bytes": 1000 * (1 + (i * 7) % layers), "shape": [1],
                           "dtype": "float32", "trainable": True, "path": f"w{i}"}
                 for i in range(layers)}
    g = new_graph({"cpu": 1}, variables=variables,
                  meta={"model": name, "mode": mode, "batch": batch, "iterations": 2})
    data = {"control": False, "bytes": 4}
    prev = None
    for i in range(layers):
        _op(g, f"read{i}", 0.0, "ReadVariableOp", reads=[f"w{i}"])
        _op(g, f"fwd{i}", 1e-3 * (1 + i % 3), "Conv2D")
        g.add_edge(f"read{i}", f"fwd{i}", **data)
        if prev:
            g.add_edge(prev, f"fwd{i}", **data)
        prev = f"fwd{i}"
    if mode == "train":
        for i in reversed(range(layers)):
            _op(g, f"grad{i}", 1e-3 * (1 + i % 2), "Conv2DBackpropFilter",
                grad_of=[f"w{i}"], is_gradient=True)
            g.add_edge(prev, f"grad{i}", **data)
            prev = f"grad{i}"
            _op(g, f"apply{i}", 1e-4, "ResourceApplyGradientDescent", updates=[f"w{i}"])
            g.add_edge(f"grad{i}", f"apply{i}", **data)
    return g


def config(traces: list[str], **over) -> dict:
    """The tictac section naming ``traces`` (files <trace dir>/<name>.json.gz)."""
    names = [Path(t).name.removesuffix(".json.gz") for t in traces]
    c = {
        "traces": names, "seed": 0, "jitter": 0.1, "comm_to_compute": 1.0,
        "latency_s": 0.0, "sharding": "round_robin", "duplex": True, "coarsen": True,
        "baseline_interleave": "rank",
        "iterations": 4,
        "validate_every": 1,
        "workers": {"n_workers": [2, 4], "workers_per_server": 2},
        "servers": {"n_workers": 4, "n_servers": [1, 2]},
        "batch": {"factors": [0.5, 2.0], "n_workers": 2, "n_servers": 1},
        "models": {"n_workers": 3, "n_servers": 1},
        "steptime": {"trace": names[0], "n_workers": 2, "n_servers": 1, "iterations": 20},
    }
    c.update(over)
    return c


@pytest.fixture
def traces(tmp_path: Path) -> list[str]:
    out = []
    for name, mode in (("chain", "infer"), ("chain", "train")):
        p = tmp_path / f"{name}-{mode}-b4.json.gz"
        save(tiny_trace(name, mode), p)
        out.append(str(p))
    return out


def test_calibrated_link_balances_channel_and_compute(traces):
    params = ex.Params.from_mapping(config(traces))
    (m,) = ex.load_models(traces[:1], params)
    v = m.view(params, 1)
    recv = sum(a["duration"] for _, a in v.nodes(data=True) if a["kind"] == "recv")
    comp = sum(a["duration"] for _, a in v.nodes(data=True) if a["kind"] == "compute")
    # workers_per_server (2) workers' recvs on one link take comm_to_compute (1) x compute.
    assert 2 * recv == pytest.approx(comp)


def test_order_efficiencies_match_metrics(traces):
    params = ex.Params.from_mapping(config(traces))
    (m,) = ex.load_models(traces[1:], params)
    g = m.view(params, 1)
    recvs = [n for n, a in g.nodes(data=True) if a["kind"] == "recv"]
    ranks = np.array([np.arange(len(recvs)), np.arange(len(recvs))[::-1]], dtype=float)
    eff = ex.order_efficiencies(g, recvs, ranks)
    for row, e in zip(ranks, eff, strict=True):
        s = simulate(g, priorities=dict(zip(recvs, row.tolist(), strict=True)))
        assert e == pytest.approx(efficiency(g, s.makespan))
    # In the chain, layer order feeds the forward pass first: at least as good as reversed.
    assert eff[0] >= eff[1]


@pytest.mark.parametrize("figure", ["workers", "servers", "batch", "models"])
def test_figure_drivers_end_to_end(tmp_path, traces, figure):
    table = tmp_path / f"tictac_{figure}.csv"
    cfg = json.dumps(config(traces))
    assert ex.main([figure, "--config-json", cfg, "--trace-dir", str(tmp_path),
                    "--table", str(table)]) == 0
    df = read_table(table)
    assert set(df.algo) == set(ex.ALGOS) and set(df["mode"]) == {"infer", "train"}
    assert (df.validated_schedules == 4).all()
    assert (df[df.algo == "baseline"].gain_pct == 0).all()
    expected = {"workers": [(2, 1), (4, 2)], "servers": [(4, 1), (4, 2)],
                "batch": [(2, 1)], "models": [(3, 1)]}[figure]
    assert sorted(set(zip(df.n_workers, df.n_servers, strict=True))) == expected
    if figure == "models":
        assert df.efficiency.between(0, 1).all()
    else:
        assert df.efficiency.isna().all()
    if figure == "batch":
        assert sorted(set(df.batch_factor)) == [0.5, 2.0]
        # Doubling compute (comm unchanged) lengthens every iteration.
        t = df.set_index(["mode", "algo", "batch_factor"]).iter_mean_s
        assert all(t[(mo, a, 2.0)] > t[(mo, a, 0.5)] for mo in ("infer", "train")
                   for a in ex.ALGOS)


def test_steptime_and_metrics_end_to_end(tmp_path, traces):
    cfg = json.dumps(config(traces))
    tables = {}
    for figure in ("workers", "models", "steptime"):
        tables[figure] = tmp_path / f"tictac_{figure}.csv"
        assert ex.main([figure, "--config-json", cfg, "--trace-dir", str(tmp_path),
                        "--table", str(tables[figure])]) == 0
    st = read_table(tables["steptime"])
    assert len(st) == 2 * 20 and set(st.algo) == {"baseline", "tac"}
    assert st.normalized_step_time.max() == pytest.approx(1.0)
    assert st.normalized_step_time.between(0, 1).all()
    # TAC uses one order: its E is the same every iteration.
    assert st[st.algo == "tac"].efficiency.nunique() == 1
    metrics = tmp_path / "tictac.csv"
    args = ["metrics", "--tables", *[f"{k}={v}" for k, v in tables.items()],
            "--metrics", str(metrics)]
    assert ex.main(args) == 0
    got = read_metrics([metrics])
    for name in ("infer.max_gain_pct", "train.max_gain_pct", "max_straggler_reduction",
                 "models.max_straggler_reduction", "infer.gain_growth_pp",
                 "tic_over_tac_throughput_min", "steptime.r2_baseline", "steptime.r2_all",
                 "steptime.p95_normalized_baseline", "steptime.p95_normalized_tac"):
        assert f"tictac.sim.{name}" in got
    # The metrics are computed from the tables, not typed in.
    w = read_table(tables["workers"])
    best = w[(w.algo == "tac") & (w["mode"] == "infer")].gain_pct.max()
    assert got["tictac.sim.infer.max_gain_pct"][0] == pytest.approx(best)


def test_headline_metrics_on_a_known_table():
    rows = []
    for n, base, tac_t in ((2, 10.0, 9.0), (4, 12.0, 10.0)):
        for algo, t, s in (("baseline", base, 0.2), ("tic", tac_t + 0.5, 0.15),
                           ("tac", tac_t, 0.1)):
            rows.append({"model": "m", "mode": "infer", "n_workers": n, "n_servers": 1,
                         "batch_factor": 1.0, "algo": algo, "iter_mean_s": t,
                         "straggler_mean": s, "efficiency": 0.5})
    df = ex._add_gains(pd.DataFrame(rows))
    got = ex.headline_metrics({"workers": df, "models": df[df.n_workers == 2]})
    # gains: 10/9 - 1 = 11.1 %, 12/10 - 1 = 20 %; straggler reduction 0.2 / 0.1 = 2.
    assert got["tictac.sim.infer.max_gain_pct"] == pytest.approx(20.0)
    assert got["tictac.sim.infer.gain_growth_pp"] == pytest.approx(20.0 - 100 / 9)
    assert got["tictac.sim.max_straggler_reduction"] == pytest.approx(2.0)
    assert got["tictac.sim.tic_over_tac_throughput_min"] == pytest.approx(9.0 / 9.5)


def test_r2_of_a_line_and_of_noise():
    x = np.linspace(0, 1, 50)
    assert ex._r2(x, 3 * x + 1) == pytest.approx(1.0)
    assert math.isnan(ex._r2(np.ones(5), x[:5]))


def test_bad_config_one_line_errors(traces, tmp_path, capsys):
    bad = config(traces, jitter=1.5)
    code = ex.main(["workers", "--config-json", json.dumps(bad), "--table",
                    str(tmp_path / "t.csv")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "jitter" in err and "\n" not in err
    with pytest.raises(CommschedError, match="missing key 'steptime'"):
        c = config(traces)
        del c["steptime"]
        ex.Params.from_mapping(c)
    with pytest.raises(CommschedError, match="n_workers"):
        ex.Params.from_mapping(config(traces, models={"n_workers": 0, "n_servers": 1}))
    assert ex.main(["workers", "--config", str(tmp_path / "nope.yaml"), "--table",
                    str(tmp_path / "t.csv")]) == 2


def test_trace_without_parameters_is_rejected(tmp_path):
    g = new_graph({"cpu": 1}, variables={},
                  meta={"model": "x", "mode": "infer", "batch": 1, "iterations": 1})
    _op(g, "a", 1.0, "MatMul")
    p = tmp_path / "x.json"
    save(g, p)
    params = ex.Params.from_mapping(config([str(p)]))
    with pytest.raises(CommschedError, match="calibrate"):
        ex.load_models([str(p)], params)


def test_ps_view_of_tiny_trace_is_a_ps_graph():
    v = ps_view(tiny_trace("chain", "train"), n_servers=2, link=LinkModel(0.0, 1e6))
    kinds = [a["kind"] for _, a in v.nodes(data=True)]
    assert kinds.count("recv") == 5 and kinds.count("send") == 5
    assert not any(n.startswith("apply") for n in v.nodes)
