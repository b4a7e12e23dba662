"""`commsched view`, the gradient-size table (PACE Fig. 4) and the view summary."""

from __future__ import annotations

import pytest
from views_graphs import bn_trace, mlp_trace

from commsched.cli import main
from commsched.model import graph
from commsched.pace.experiments import grad_sizes
from commsched.results import read_table
from commsched.views import recv_params
from commsched.views import summary as view_summary


@pytest.fixture
def traces(tmp_path):
    paths = {}
    for name, t in (("mlp-train-b1", mlp_trace()), ("bn-train-b1", bn_trace())):
        paths[name] = tmp_path / f"{name}.json"
        graph.save(t, paths[name])
    return paths


def test_view_ps_command(traces, tmp_path, capsys):
    out = tmp_path / "ps.json"
    assert main(["view", "ps", str(traces["mlp-train-b1"]), "-o", str(out), "--servers", "2",
                 "--sharding", "size", "--link", "1GbE", "--latency", "0"]) == 0
    assert "17 ops (3 recvs, 3 sends)" in capsys.readouterr().out
    v = graph.load(out)
    assert recv_params(v) == {"recv:w1": "w1", "recv:b1": "b1", "recv:w2": "w2"}
    assert v.graph["shards"] == {"w1": 0, "w2": 1, "b1": 1}
    assert v.nodes["recv:w1"]["duration"] == pytest.approx(400 / 125e6)
    # --bandwidth overrides the preset's
    assert main(["view", "ps", str(traces["mlp-train-b1"]), "-o", str(out), "--bandwidth",
                 "100", "--latency", "0", "--simplex"]) == 0
    v = graph.load(out)
    assert v.nodes["send:w1"]["resource"] == "net:ps0"
    assert v.nodes["recv:w1"]["duration"] == pytest.approx(4.0)


def test_view_allreduce_command(traces, tmp_path, capsys):
    out = tmp_path / "ar.json"
    assert main(["view", "allreduce", str(traces["bn-train-b1"]), "-o", str(out),
                 "--linear", "0.5", "0.01"]) == 0
    assert "2 all-reduces" in capsys.readouterr().out
    v = graph.load(out)
    assert v.nodes["allreduce:g_bn"]["duration"] == pytest.approx(1.3)
    assert main(["view", "allreduce", str(traces["bn-train-b1"]), "-o", str(out),
                 "--workers", "4", "--bandwidth", "100", "--latency", "0",
                 "--no-next-forward"]) == 0
    v = graph.load(out)
    # ring of 4: 2*3/4 * 400 B / 100 B/s = 6 s
    assert v.nodes["allreduce:g_conv"]["duration"] == pytest.approx(6.0)
    assert not any(n.startswith("next:") for n in v)


def test_view_command_errors(traces, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    t = mlp_trace()
    t.nodes["g_w1"]["grad_of"] = ["nope"]
    bad.write_text("{not json")
    assert main(["view", "ps", str(bad), "-o", str(tmp_path / "x.json")]) == 2
    assert "invalid JSON" in capsys.readouterr().err
    graph.save(t, bad)
    assert main(["view", "ps", str(bad), "-o", str(tmp_path / "x.json")]) == 2
    assert "op 'g_w1': grad_of names unknown variable 'nope'" in capsys.readouterr().err
    assert main(["view", "allreduce", str(traces["mlp-train-b1"]), "-o",
                 str(tmp_path / "x.json"), "--linear", "-1", "0"]) == 2
    assert not (tmp_path / "x.json").exists()


def test_grad_sizes_table_and_metrics(traces, tmp_path):
    table, metrics = tmp_path / "g.csv", tmp_path / "m.csv"
    assert grad_sizes.main(["--traces", *map(str, traces.values()), "--table", str(table),
                            "--metrics", str(metrics)]) == 0
    df = read_table(table)
    tensors = df[df.kind == "tensor"]
    assert sorted(tensors[tensors.model == "bn"].bytes) == [40, 40, 400]
    ars = df[(df.kind == "allreduce") & (df.model == "bn")].set_index("producer")
    assert ars.loc["g_bn", "bytes"] == 80 and ars.loc["g_conv", "bytes"] == 400
    m = read_table(metrics).set_index("metric")["value"]
    assert m["comm.grad_sizes.mlp.n_tensors"] == 3
    assert m["comm.grad_sizes.mlp.median_bytes"] == 80
    assert m["comm.grad_sizes.mlp.frac_below_1MiB"] == 1.0
    assert m["comm.grad_sizes.bn.max_bytes"] == 400


def test_view_summary(traces, tmp_path):
    views = []
    for name, path in traces.items():
        for kind, extra in (("ps", []), ("allreduce", ["--workers", "2"])):
            out = tmp_path / f"{name}-{kind}.json"
            assert main(["view", kind, str(path), "-o", str(out), "--bandwidth", "100",
                         "--latency", "0", *extra]) == 0
            views.append(str(out))
    table = tmp_path / "s.csv"
    assert view_summary.main(["--views", *views, "--table", str(table)]) == 0
    df = read_table(table).set_index(["trace", "view"])
    # makespans computed by hand in test_views_ps.py / test_views_allreduce.py
    assert df.loc[("mlp-train-b1", "ps"), "makespan_s"] == pytest.approx(18.0)
    assert df.loc[("bn-train-b1", "allreduce"), "makespan_s"] == pytest.approx(15.0)
    assert df.loc[("mlp-train-b1", "ps"), "comm_bytes"] == 2 * (400 + 40 + 80)
    # bn all-reduce: compute 7 + 4 (next forward) = 11 s, comm 4.8 s, makespan 15:
    # overlap = (11 + 4.8 - 15) / 4.8
    assert df.loc[("bn-train-b1", "allreduce"), "overlap"] == pytest.approx(0.8 / 4.8)
