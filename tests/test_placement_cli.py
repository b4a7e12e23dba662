"""`commsched place`, the registries' reach into the CLI and config schema, the traced-graph
conversion and the placement experiments on tiny settings."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import yaml

from commsched.cli import main
from commsched.io.thesis import write_devices, write_graph
from commsched.model.traced import load_trace
from commsched.placement import (
    DEVICE_SCHEDULERS,
    PARTITIONERS,
    SEMANTICS,
    PlacementError,
    Problem,
    run_all,
)
from commsched.placement.experiments import thesis as exp
from commsched.placement.model import check_fits, check_placement, random_devices
from commsched.placement.traced import problem_from_trace
from commsched.results import read_metrics
from commsched.trace.synthetic import level_dag

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared" / "thesis-data").resolve()
needs_shared = pytest.mark.skipif(not SHARED.is_dir(),
                                  reason=f"thesis sample data not found at {SHARED}")


@pytest.fixture
def files(tmp_path):
    g = level_dag(levels=6, min_per_level=2, max_per_level=5, edge_prob=0.4,
                  max_level_distance=2, colocation_scale=0.5, cpu_prob=0.1, seed=4)
    write_graph(g, tmp_path / "g.csv")
    write_devices(random_devices(4, seed=2).to_devices(), tmp_path / "d.csv")
    return tmp_path / "g.csv", tmp_path / "d.csv"


def test_place_all_json(files, capsys):
    g, d = files
    assert main(["place", str(g), str(d), "--partitioner", "all", "--scheduler", "all",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(PARTITIONERS) * len(DEVICE_SCHEDULERS)
    assert {"makespan", "traffic", "partition_s"} <= set(out[0])


def test_place_one_with_trace(files, tmp_path, capsys):
    g, d = files
    trace = tmp_path / "t.json"
    assert main(["place", str(g), str(d), "--partitioner", "mite", "--scheduler", "msr",
                 "--semantics", "published-code", "--seed", "3", "--chrome-trace",
                 str(trace)]) == 0
    assert "mite" in capsys.readouterr().out
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" for e in events)


def test_place_errors_are_one_line(files, tmp_path, capsys):
    g, d = files
    assert main(["place", str(g), str(tmp_path / "missing.csv"), "--partitioner", "cp",
                 "--scheduler", "pct"]) == 2
    assert main(["place", str(g), str(d), "--partitioner", "all", "--scheduler", "pct",
                 "--chrome-trace", str(tmp_path / "x.json")]) == 2
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("Id,RAM,#operations,commnication speed,type\n0,1,10,,CPU\n")
    assert main(["place", str(g), str(tiny), "--partitioner", "hashing",
                 "--scheduler", "fifo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "node" in err[-1] and "the largest device" in err[-1]
    assert str(tiny) in err[-1]
    head = ("Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize,#operations,"
            "RAM storage,Device constraint,name\n")
    bad = {"malformed": ("0,1,,,10,x,1,NO,a\n1,,0,,5,5,1,NO,b\n", "not an integer: 'x'"),
           "contradictory colocation": ("0,1,,1,10,5,1,CPU,a\n1,,0,0,5,5,1,GPU,b\n",
                                        "need different device types")}
    for name, (rows, expect) in bad.items():
        graph = tmp_path / f"{name.replace(' ', '_')}.csv"
        graph.write_text(head + rows)
        assert main(["place", str(graph), str(d), "--partitioner", "mite",
                     "--scheduler", "pct"]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expect in err[0], (name, err)


#: The thesis' full names (Secs. 4.3-4.8, 5.2-5.4) and the members they name.
ALIASES = ({"heterogeneous-earliest-finish-time": "heft", "iterated-critical-path": "icp",
            "critical-path": "cp", "depth-first-search": "dfs"},
           {"first-in-first-out": "fifo", "path-computation-time-first": "pct",
            "maximum-successor-rank-first": "msr"})


def test_registries_reach_cli_and_schema():
    schema = yaml.safe_load((ROOT / "src/commsched/schemas/config.schema.yaml").read_text())
    pl = schema["properties"]["placement"]["properties"]
    gantt = pl["seven"]["properties"]["gantt_scheduler"]["enum"]
    assert gantt == DEVICE_SCHEDULERS.choices() == ["fifo", "pct", "msr", *ALIASES[1]]
    assert pl["semantics"]["items"]["enum"] == list(SEMANTICS)
    from commsched.cli import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices["place"]  # type: ignore[union-attr]
    choices = {a.dest: a.choices for a in sub._actions if a.choices}
    assert list(choices["partitioner"]) == [*PARTITIONERS.choices(), "all"]
    assert list(choices["scheduler"]) == [*DEVICE_SCHEDULERS.choices(), "all"]


def test_thesis_names_run_as_their_members(files, capsys):
    assert PARTITIONERS.aliases() == ALIASES[0] and DEVICE_SCHEDULERS.aliases() == ALIASES[1]
    g, d = files
    assert main(["place", str(g), str(d), "--partitioner", "iterated-critical-path",
                 "--scheduler", "maximum-successor-rank-first", "--json"]) == 0
    by_alias = json.loads(capsys.readouterr().out)
    assert main(["place", str(g), str(d), "--partitioner", "icp", "--scheduler", "msr",
                 "--json"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert (by_alias["partitioner"], by_alias["scheduler"]) == ("icp", "msr")
    assert by_alias["makespan"] == by_name["makespan"]
    assert by_alias["traffic"] == by_name["traffic"]


def test_traced_graphs_convert():
    for name in ("thesis_cnn-train-b8", "thesis_rnn-train-b8"):
        p = problem_from_trace(load_trace(ROOT / "data/traces" / f"{name}.json.gz"))
        assert p.ops.min() >= 1 and p.ops.max() <= 100
        assert p.unit_colocated.any()  # variables and their readers/updaters
        run_all(p, random_devices(7, seed=0), ["mite"], ["pct"])


@needs_shared
def test_published_cnn_graph_all_combinations():
    # the thesis-format CNN graph of the published simulator (346 nodes) on its 7 devices
    from commsched.io.thesis import read_devices, read_graph
    from commsched.placement.model import Cluster
    p = Problem.from_thesis(read_graph(SHARED / "convolutional_network_graph.csv"))
    c = Cluster.from_devices(read_devices(SHARED / "devices7.csv"))
    res = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS))
    assert p.n == 346 and len(res) == 21


def test_experiments_tiny(tmp_path):
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())["placement"]
    cfg["full"] = False  # the reduced profile's sizes below, not the thesis' (the default)
    cfg["synthetic"].update(graphs=[2, 3], runs=1, scale=0.01, devices=10)
    cfg["tensorflow"].update(traces=["thesis_cnn-train-b8", "thesis_dynamic_rnn-train-b8"],
                             runs=1, thesis_csv=[str(tmp_path / "absent_graph.csv")])
    cfg["seven"].update(traces=["thesis_dynamic_rnn-train-b8"], runs=1, scale=0.01)
    syn = exp.run_synthetic(cfg)
    tf = exp.run_tensorflow(cfg, str(ROOT / "data/traces"))
    seven, gantt = exp.run_seven(cfg, str(ROOT / "data/traces"))
    t71 = exp.table71(0)
    assert t71.rel_err.abs().max() < 0.05  # Table 7.1 counts within 5%
    n_combo = len(PARTITIONERS) * len(DEVICE_SCHEDULERS) * len(cfg["semantics"])
    assert len(syn) == 2 * n_combo and len(tf) == 2 * n_combo
    assert set(gantt.kind) <= {"compute", "send", "recv"} and (gantt.executable >= 1).all()
    from commsched.results import write_metrics
    m = exp.headline_metrics(syn, tf, seven, gantt, t71)
    write_metrics(m, tmp_path / "m.csv")
    got = read_metrics([tmp_path / "m.csv"])
    assert got["placement.synthetic.traffic_scheduler_spread"][0] == 0.0
    assert "placement.tensorflow.heft_over_mite_max" in got


def test_timed_runs_come_after_every_partitioner_is_warmed_up(monkeypatch):
    # No partition_s may include loading a numba kernel: every partitioner under every
    # semantics runs once on a tiny graph before the first timed run of the first graph.
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())["placement"]
    calls: list[tuple[int, str, str]] = []
    real = exp.partition

    def spy(p, c, name, opts):
        calls.append((p.n, name, opts.semantics))
        return real(p, c, name, opts)

    monkeypatch.setattr(exp, "partition", spy)
    monkeypatch.setattr(exp, "run_all", lambda *a, **k: calls.append((-1, "run", "")) or [])
    big = exp.Problem.from_thesis(exp.synthetic_graph(2, 0.01, 0))
    exp._runs({"g": big}, cfg, 5, 1, ["fifo"], "test")
    k = len(PARTITIONERS) * len(cfg["semantics"])
    assert {(name, sem) for _, name, sem in calls[:k]} == {
        (pn, sem) for pn in PARTITIONERS for sem in cfg["semantics"]}
    assert all(0 < n < big.n for n, _, _ in calls[:k])
    assert calls[k:] and all(x == (-1, "run", "") for x in calls[k:])


def test_device_memory_too_small_for_a_colocated_group(tmp_path, capsys):
    # two colocated nodes of size_est 5 (output) and 3 + 5 (output, input): 13 in all, more
    # than either device's 12
    graph = tmp_path / "g.csv"
    graph.write_text("Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize,"
                     "#operations,RAM storage,Device constraint,name\n"
                     "0,1,,1,5,10,0,NO,a\n1,,0,0,3,10,0,NO,b\n")
    devices = tmp_path / "d.csv"
    devices.write_text("Id,RAM,#operations,commnication speed,type\n"
                       "0,12,10,20,CPU\n1,12,10,,GPU\n")
    out = tmp_path / "never.json"
    assert main(["place", str(graph), str(devices), "--partitioner", "all",
                 "--scheduler", "fifo", "--chrome-trace", str(out)]) == 2  # two runs
    capsys.readouterr()
    for sem in SEMANTICS:
        assert main(["place", str(graph), str(devices), "--partitioner", "cp",
                     "--scheduler", "fifo", "--semantics", sem]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert ("colocation group of nodes 0, 1 (2 nodes) needs 13 of memory, the largest "
                "device of its type (any) holds 12") in err[0]
        assert str(devices) in err[0]
    assert not out.exists()


def test_missing_device_type_and_placement_off_the_cluster():
    p = Problem.build(ops=[1, 1], size=[1, 1], edges=[(0, 1)], constraint=["TPU", "NO"])
    c = random_devices(2, seed=1)
    with pytest.raises(PlacementError, match=r"^node 0 needs a TPU device; there is none$"):
        check_fits(p, c)
    q = Problem.build(ops=[1, 1], size=[1, 1], edges=[(0, 1)])
    with pytest.raises(PlacementError, match=r"^node 1 is not placed on a device 0\.\.1$"):
        check_placement(q, c, np.array([0, 2]))
    with pytest.raises(PlacementError, match=r"^node 0 is not placed on a device 0\.\.1$"):
        check_placement(q, c, np.array([-1, 0]))


@pytest.mark.parametrize("attrs,expect", [
    ({"duration": None}, "op 'b' has no traced time"),
    ({"duration": float("nan")}, "op 'b' has no traced time"),
    ({"duration": -1.0}, "op 'b' has no traced time"),
    ({"duration": 1.0, "out_bytes": "x"}, "op 'b': output bytes 'x'"),
])
def test_trace_ops_that_cannot_be_mapped(attrs, expect):
    g = nx.DiGraph()
    g.add_node("a", duration=1.0, out_bytes=8)
    g.add_node("b", **attrs)
    g.add_edge("a", "b")
    with pytest.raises(PlacementError, match=expect) as e:
        problem_from_trace(g)
    assert "\n" not in str(e.value)
