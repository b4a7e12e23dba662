"""Chakra execution traces in and out (commsched.io.chakra, ``commsched trace
import-chakra`` / ``export-chakra``): exact round trips, Chakra's own readers, errors and
unmapped items, and every op-graph consumer on an imported trace."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cli import main
from commsched.cost import LinearModel, LinkModel, RingAllReduce
from commsched.echelon.jobs import JobSpec, build_job
from commsched.echelon.opgraph import job_op_graph
from commsched.echelon.profile import layer_profile
from commsched.errors import CommschedError
from commsched.io.chakra import export_chakra, import_chakra, read_et, write_et
from commsched.model import graph
from commsched.model.traced import check_graph
from commsched.placement import DEVICE_SCHEDULERS, PARTITIONERS
from commsched.placement.model import Cluster
from commsched.placement.run import run_all
from commsched.placement.traced import problem_from_trace
from commsched.tictac import sim as multiworker
from commsched.tictac.order import tac, tic
from commsched.views import allreduce_view, ps_view

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "data/traces").glob("*.json.gz"))
BIN = Path(sys.executable).parent


def assert_same(a: nx.DiGraph, b: nx.DiGraph) -> None:
    assert list(a.nodes) == list(b.nodes)
    for n in a.nodes:
        assert a.nodes[n] == b.nodes[n], n
    assert sorted(a.edges) == sorted(b.edges)
    for e in a.edges:
        assert a.edges[e] == b.edges[e], e
    assert a.graph == b.graph


def chakra_nodes(path: Path) -> list[pb.Node]:
    """The nodes of an ET as Chakra's own reader (protolib) decodes them."""
    f = openFileRd(str(path))
    meta = pb.GlobalMetadata()
    assert decodeMessage(f, meta)
    out = []
    n = pb.Node()
    while decodeMessage(f, n):
        out.append(n)
        n = pb.Node()
    f.close()
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_round_trip_of_every_committed_trace_is_exact(path: Path, tmp_path: Path) -> None:
    g = graph.load(path)
    files = export_chakra(g, tmp_path / "t")
    assert [f.name for f in files] == ["t.0.et"]
    imported = import_chakra(files, strict=True)
    assert_same(g, imported.graph)
    assert not imported.unmapped
    # the ET holds the same nodes, dependencies and (microsecond) durations in Chakra's
    # fields (read_et decodes as Chakra's protolib does: test_read_et_matches_...)
    nodes = read_et(files[0])[1]
    assert len(nodes) == g.number_of_nodes()
    assert sum(len(n.data_deps) + len(n.ctrl_deps) for n in nodes) == g.number_of_edges()
    assert [n.duration_micros for n in nodes] == [
        round(a["duration"] * 1e6) for _, a in g.nodes(data=True)]


def test_allreduce_view_as_data_parallel_ranks_read_by_chakra_jsonizer(tmp_path: Path) -> None:
    trace = graph.load(ROOT / "data/traces/thesis_cnn-train-b8.json.gz")
    view = allreduce_view(trace, RingAllReduce(4, LinkModel.preset("10GbE")))
    assert_same(view, import_chakra(export_chakra(view, tmp_path / "one")).graph)
    files = export_chakra(view, tmp_path / "ar", replicas=4)
    assert len(files) == 4
    n_ar = len(view.graph["allreduces"])
    for f in files:
        out = tmp_path / f"{f.name}.json"
        subprocess.run([str(BIN / "chakra_jsonizer"), "--input_filename", str(f),
                        "--output_filename", str(out)], check=True, capture_output=True)
        text = out.read_text()
        assert text.count('"COMM_COLL_NODE"') == n_ar
        assert text.count('"COMP_NODE"') == view.number_of_nodes() - n_ar
    g = import_chakra(files, strict=True).graph
    ars = [n for n, a in g.nodes(data=True) if a["kind"] == "allreduce"]
    assert sorted(ars) == sorted(view.graph["allreduces"])  # one op joins the 4 ranks
    assert all(g.nodes[n]["ranks"] == [0, 1, 2, 3] for n in ars)
    assert g.number_of_nodes() == 4 * (view.number_of_nodes() - n_ar) + n_ar
    assert g.number_of_edges() > 4 * view.number_of_edges() - 4 * n_ar
    # every rank's copy of a gradient op feeds the joined all-reduce
    p = next(iter(view.graph["allreduces"])).removeprefix("allreduce:")
    assert {u for u, _ in g.in_edges(f"allreduce:{p}")} == {f"{r}:{p}" for r in range(4)}
    assert g.nodes["0:" + p]["resource"] == "rank0:cpu"
    graph.validate(g)


def test_echelonflow_pipeline_job_round_trip_and_send_recv_pairs(tmp_path: Path) -> None:
    trace = graph.load(ROOT / "data/traces/thesis_cnn-train-b8.json.gz")
    job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1, 2), micro_batches=2),
                    layer_profile(trace, 3))
    g = job_op_graph(job, 1.25e9)
    files = export_chakra(g, tmp_path / "pp")
    assert len(files) == 3
    types = [[pb.NodeType.Name(n.type) for n in chakra_nodes(f)] for f in files]
    n_flows = len(job.flow_src)
    assert sum(t.count("COMM_SEND_NODE") for t in types) == n_flows
    assert sum(t.count("COMM_RECV_NODE") for t in types) == n_flows
    assert_same(g, import_chakra(files, strict=True).graph)


def _et(path: Path, nodes: list[pb.Node], meta: pb.GlobalMetadata | None = None) -> Path:
    write_et(path, meta or pb.GlobalMetadata(version="0.0.4"), nodes)
    return path


def _node(i: int, t: int = pb.COMP_NODE, data: tuple[int, ...] = (), ctrl: tuple[int, ...] = (),
          us: int = 10, **attrs: int | str) -> pb.Node:
    n = pb.Node(id=i, name=f"n{i}", type=t, duration_micros=us)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    for k, v in attrs.items():
        a = pb.AttributeProto(name=k)
        if isinstance(v, str):
            a.string_val = v
        else:
            a.int64_val = v
        n.attr.append(a)
    return n


def test_foreign_ranks_join_collectives_and_send_recv_pairs(tmp_path: Path) -> None:
    for r in (0, 1):
        peer = 1 - r
        _et(tmp_path / f"w.{r}.et", [
            _node(0, us=100 + r),
            _node(1, pb.COMM_COLL_NODE, data=(0,), us=50 + 10 * r, comm_type=pb.ALL_REDUCE,
                  comm_size=4096),
            _node(2, pb.COMM_COLL_NODE, data=(1,), comm_type=pb.ALL_GATHER, comm_size=64),
            _node(3, pb.COMM_SEND_NODE if r == 0 else pb.COMM_RECV_NODE, data=(2,),
                  comm_size=128, **({"comm_dst": peer} if r == 0 else {"comm_src": peer})),
            _node(4, ctrl=(3,), us=7),
        ])
    imp = import_chakra([tmp_path], strict=True)
    g = imp.graph
    assert not imp.unmapped and imp.ranks == {0: str(tmp_path / "w.0.et"),
                                              1: str(tmp_path / "w.1.et")}
    kinds = {n: a["kind"] for n, a in g.nodes(data=True)}
    assert sorted(kinds.values()) == ["allreduce", "collective", "compute", "compute",
                                      "compute", "compute", "transfer"]
    ar = next(n for n, k in kinds.items() if k == "allreduce")
    assert g.nodes[ar]["bytes"] == 4096 and g.nodes[ar]["ranks"] == [0, 1]
    assert g.nodes[ar]["duration"] == pytest.approx(60e-6)  # the slower member
    tr = next(n for n, k in kinds.items() if k == "transfer")
    assert (g.nodes[tr]["src"], g.nodes[tr]["dst"], g.nodes[tr]["bytes"]) == (0, 1, 128)
    assert g.has_edge(tr, "1:4") and g.has_edge(tr, "0:4") and g.edges[tr, "1:4"]["control"]
    assert g.nodes["0:0"]["resource"] == "rank0:cpu" and g.nodes["1:0"]["duration"] == 101e-6
    saved = _saved(g, tmp_path)  # a fresh process knows the collective kind
    for cmd in (["validate", saved], ["simulate", saved]):
        subprocess.run([sys.executable, "-m", "commsched", *cmd], check=True,
                       capture_output=True)
    # and back out: Chakra reads it, the ranks exchange the same messages
    files = export_chakra(g, tmp_path / "again")
    again = import_chakra(files, strict=True).graph
    assert_same(g, again)


def test_ets_of_chakras_own_generator(tmp_path: Path) -> None:
    subprocess.run([str(BIN / "chakra_generator"), "--num_npus", "2",
                    "--default_comm_size", "4096", "--default_tensor_size", "512"],
                   cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    for coll, kind in (("ALL_REDUCE", "allreduce"), ("ALL_GATHER", "collective")):
        g = import_chakra([tmp_path / f"{coll}.0.et", tmp_path / f"{coll}.1.et"],
                          strict=True).graph
        ((_, a),) = g.nodes(data=True)
        assert (a["kind"], a["ranks"], a["bytes"]) == (kind, [0, 1], 4096)
        assert kind == "allreduce" or a["collective"] == coll
    dep = import_chakra([tmp_path / "two_comp_nodes_dependent.0.et"], strict=True).graph
    assert dep.number_of_nodes() == 2 and dep.number_of_edges() == 1
    # its sends name no peer: kept as send ops with their size, counted
    sends = import_chakra([tmp_path / "one_comm_send_node.0.et"])
    assert [a["kind"] for _, a in sends.graph.nodes(data=True)] == ["send"]
    assert [a["bytes"] for _, a in sends.graph.nodes(data=True)] == [512]  # tensor_size
    assert sends.unmapped == {"point-to-point ops without a peer (kept unjoined)": 1}
    mem = import_chakra([tmp_path / "one_remote_mem_load_node.0.et"])
    assert [a.get("chakra_type") for _, a in mem.graph.nodes(data=True)] == ["MEM_LOAD_NODE"]


def test_unmapped_items_are_counted_and_strict_fails(tmp_path: Path) -> None:
    path = _et(tmp_path / "u.et", [
        _node(0, pb.METADATA_NODE, us=0),
        _node(1, data=(0, 99)),                      # 99 is not in the file
        _node(2, pb.COMM_COLL_NODE, data=(1,), comm_type=pb.ALL_REDUCE),  # no size
        _node(3, pb.MEM_LOAD_NODE, data=(2,)),
    ])
    imp = import_chakra([path])
    assert imp.unmapped == {
        "METADATA_NODE nodes (kept as compute ops)": 1,
        "MEM_LOAD_NODE nodes (kept as compute ops)": 1,
        "dependencies on nodes not in the file (dropped)": 1,
        "communication ops without a size (kept without bytes)": 1,
    }
    assert imp.graph.number_of_nodes() == 4 and imp.graph.number_of_edges() == 3
    line = imp.summary()
    assert "\n" not in line and "1 dependencies on nodes not in the file" in line
    with pytest.raises(CommschedError, match=r"u\.et: node 0: METADATA_NODE.*--strict"):
        import_chakra([path], strict=True)


def test_bad_traces_give_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    good = _et(tmp_path / "g.et", [_node(0), _node(1, data=(0,))])
    data = good.read_bytes()
    cases = {
        "truncated": data[:-3],
        "garbage": b"\x05\xff\xff\xff\xff\xff",
        "empty": b"",
    }
    for name, raw in cases.items():
        (tmp_path / f"{name}.et").write_bytes(raw)
    _et(tmp_path / "cycle.et", [_node(0, data=(1,)), _node(1, data=(0,))])
    _et(tmp_path / "dup.et", [_node(0), _node(0)])
    expect = {"truncated": "truncated", "garbage": "malformed Chakra trace",
              "empty": "empty Chakra trace", "cycle": "cycle", "dup": "node id 0 appears twice"}
    for name, msg in expect.items():
        out = tmp_path / f"{name}.json"
        assert main(["trace", "import-chakra", str(tmp_path / f"{name}.et"), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and f"{name}.et" in err
        assert not out.exists()
    twins = [_et(tmp_path / f"{x}.0.et", [_node(0)]) for x in "ab"]
    with pytest.raises(CommschedError, match=r"b\.0\.et: rank 0 is also .*a\.0\.et"):
        import_chakra(twins)


def test_cli_round_trip_and_old_invocations(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    src = ROOT / "data/traces/alexnet_v2-train-b4.json.gz"
    assert main(["trace", "export-chakra", str(src), "-o", str(tmp_path / "a")]) == 0
    assert main(["trace", "import-chakra", str(tmp_path / "a.0.et"), "-o",
                 str(tmp_path / "a.json.gz"), "--strict"]) == 0
    assert "unmapped: none" in capsys.readouterr().out
    assert_same(graph.load(src), graph.load(tmp_path / "a.json.gz"))
    assert main(["trace", "--list"]) == 0  # the flag-only forms still work
    assert "alexnet_v2" in capsys.readouterr().out
    assert main(["trace", "--check", str(tmp_path / "no.json"), str(tmp_path / "no.raw")]) == 2


def _record_pytorch_step(tmp: Path) -> tuple[Path, Path]:
    """One training step of a small CNN on CPU: ExecutionTraceObserver + Kineto."""
    script = f"""
import torch
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile
torch.manual_seed(0); torch.set_num_threads(1)
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                        torch.nn.Linear(8 * 14 * 14, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.1, foreach=False)
x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
step()
et = ExecutionTraceObserver()
et.register_callback({str(tmp / 'host.json')!r})
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             execution_trace_observer=et) as prof:
    step()
prof.export_chrome_trace({str(tmp / 'kineto.json')!r})
"""
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=120)
    return tmp / "host.json", tmp / "kineto.json"


@pytest.mark.slow
def test_pytorch_step_linked_converted_imported_and_scheduled(tmp_path: Path) -> None:
    from commsched.cost.allreduce import allreduce_cost
    from commsched.io.chakra import link_kineto_cpu
    from commsched.pace.sim import simulate_plan

    host, kineto = _record_pytorch_step(tmp_path)
    # chakra_trace_link needs et_replay (PARAM), which is not on PyPI: it cannot run here
    link = subprocess.run([str(BIN / "chakra_trace_link"), "--rank", "0", "--chakra-host-trace",
                           str(host), "--chakra-device-trace", str(kineto), "--output-file",
                           str(tmp_path / "linked.json")], capture_output=True, text=True)
    assert link.returncode != 0 and "et_replay" in link.stderr
    linked = link_kineto_cpu(json.loads(host.read_text()), json.loads(kineto.read_text()))
    timed = [n for n in linked["nodes"] if "exclusive_dur" in n]
    assert len(timed) >= 0.9 * len(linked["nodes"])
    (tmp_path / "linked.json").write_text(json.dumps(linked))
    et = tmp_path / "step.0.et"
    subprocess.run([str(BIN / "chakra_converter"), "--log-filename", str(tmp_path / "c.log"),
                    "PyTorch", "--input", str(tmp_path / "linked.json"), "--output", str(et)],
                   check=True, capture_output=True, timeout=120)
    imp = import_chakra([et])
    g = imp.graph
    check_graph(g)
    assert g.number_of_nodes() > 50 and sum(a["duration"] for _, a in g.nodes(data=True)) > 0
    # four parameters (conv and linear weight and bias), each with its gradient op
    sizes = sorted(v["bytes"] for v in g.graph["variables"].values())
    assert sizes == sorted([8 * 3 * 3 * 3 * 4, 8 * 4, 10 * 8 * 14 * 14 * 4, 10 * 4])
    assert len({v for _, a in g.nodes(data=True) for v in a.get("grad_of", [])}) == 4
    # TicTac: the parameter-server view, TIC and TAC orders, the simulators
    view = ps_view(g, n_servers=1, link=LinkModel(1e-5, 1e8))
    assert len(view.graph["recvs"]) == 4
    for order in (tic(view), tac(view)):
        assert len(order) == 4
        res = multiworker.run(multiworker.compose(view, 2), order, 2)
        assert res.worker_end.shape == (2, 2) and (res.worker_end > 0).all()
    # PACE: all-reduce view, plan, all-reduce simulator
    av = allreduce_view(g, LinearModel(1e-5, 1e-8))
    assert len(av.graph["allreduces"]) == 4
    plan_file = tmp_path / "plan.json"
    assert main(["pace", "plan", _saved(g, tmp_path),
                 "--workers", "2", "--bandwidth", "0.01", "--slot", "0.05", "-o",
                 str(plan_file)]) == 0
    from commsched.pace.plan import load_plan

    sim = simulate_plan(g, load_plan(plan_file), allreduce_cost("ring", 2, 0.01e9 / 8))
    assert sim.iteration_time > 0
    # Laich's placement suite on the imported trace
    p = problem_from_trace(g)
    r = np.full((2, 2), 100.0)
    np.fill_diagonal(r, np.inf)
    c = Cluster(np.array([50.0, 80.0]), np.array([1e12, 1e12]), np.array([0, 0]), r)
    results = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS))
    assert len(results) == len(PARTITIONERS) * len(DEVICE_SCHEDULERS)
    assert all(x.makespan > 0 for x in results)
    # the command-line consumers
    path = _saved(g, tmp_path)
    assert main(["validate", path]) == 0
    assert main(["view", "ps", path, "-o", str(tmp_path / "ps.json")]) == 0
    assert main(["order", "--algo", "tac", str(tmp_path / "ps.json"), "-o",
                 str(tmp_path / "p.json")]) == 0
    assert main(["simulate", str(tmp_path / "ps.json"), "--priorities",
                 str(tmp_path / "p.json")]) == 0


def _saved(g: nx.DiGraph, tmp: Path) -> str:
    path = tmp / "imported.json.gz"
    graph.save(g, path)
    return str(path)


def test_read_et_matches_chakra_protolib(tmp_path: Path) -> None:
    g = graph.load(ROOT / "data/traces/vgg16-infer-b2.json.gz")
    f = export_chakra(g, tmp_path / "v")[0]
    _, ours = read_et(f)
    assert [n.SerializeToString() for n in ours] == [
        n.SerializeToString() for n in chakra_nodes(f)]


@st.composite
def multi_rank_graphs(draw: st.DrawFn) -> nx.DiGraph:
    """Random DAGs over 1-3 ranks: compute ops, transfers between ranks, collectives over
    subsets of ranks, sub-microsecond durations, control and data edges with bytes."""
    n_ranks = draw(st.integers(1, 3))
    n = draw(st.integers(1, 12))
    g = graph.new_graph({"net": 1})
    for i in range(n):
        d = draw(st.floats(0, 1e-2, allow_nan=False))
        kind = draw(st.sampled_from(["compute", "compute", "transfer", "allreduce",
                                     "collective"]))
        if kind == "transfer" and n_ranks > 1:
            s, t = draw(st.permutations(range(n_ranks)))[:2]
            g.graph["resources"].setdefault(f"link:{s}->{t}", 1)
            g.add_node(f"o{i}", kind="transfer", resource=f"link:{s}->{t}", duration=d,
                       bytes=draw(st.integers(0, 2**40)), src=s, dst=t)
        elif kind == "transfer":  # a device copy without ranks (thesis Sec. 3.3)
            g.add_node(f"o{i}", kind="transfer", resource="net", duration=d, bytes=7)
        elif kind in ("allreduce", "collective"):
            ranks = sorted(draw(st.sets(st.integers(0, n_ranks - 1), min_size=1)))
            extra = {"collective": "ALL_GATHER", "pg": "tp"} if kind == "collective" else {}
            g.add_node(f"o{i}", kind=kind, resource="net", duration=d,
                       bytes=draw(st.integers(0, 2**40)), ranks=ranks, **extra)
        else:
            r = draw(st.integers(0, n_ranks - 1))
            g.graph["resources"].setdefault(f"cpu{r}", 1)
            g.add_node(f"o{i}", kind="compute", resource=f"cpu{r}", duration=d, rank=r)
    for j in range(n):
        for i in range(j):
            if draw(st.booleans()):
                g.add_edge(f"o{i}", f"o{j}", control=draw(st.booleans()),
                           bytes=draw(st.integers(0, 1000)))
    return g


@settings(max_examples=25, deadline=None)
@given(multi_rank_graphs())
def test_round_trip_of_random_multi_rank_graphs(g: nx.DiGraph) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        assert_same(g, import_chakra(export_chakra(g, Path(tmp) / "g"), strict=True).graph)
