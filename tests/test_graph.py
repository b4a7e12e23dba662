"""The op-graph model: validation, file I/O, one-line errors, compilation."""

from __future__ import annotations

import json
import math

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsched.cli import main
from commsched.errors import GraphError
from commsched.model import graph


def small() -> nx.DiGraph:
    g = graph.new_graph({"cpu": 1, "net": 2})
    graph.add_op(g, "r", "recv", "net", 2.0, bytes=100, param="w")
    graph.add_op(g, "c", "compute", "cpu", 1.0, priority=3)
    g.add_edge("r", "c", control=False)
    return g


def test_roundtrip(tmp_path):
    g = small()
    p = tmp_path / "g.json"
    graph.save(g, p)
    h = graph.load(p)
    assert dict(h.nodes(data=True)) == dict(g.nodes(data=True))
    assert list(h.edges(data=True)) == list(g.edges(data=True))
    assert h.graph["resources"] == {"cpu": 1, "net": 2}
    assert h.graph["schema_version"] == graph.SCHEMA_VERSION


def test_compile_order_and_csr():
    g = small()
    graph.add_op(g, "x", "compute", "cpu", 0.5)
    g.add_edge("r", "x")
    cg = graph.compile_graph(g, {"r": 7})
    assert cg.ids == ["r", "c", "x"]
    assert cg.indegree == [0, 1, 1]
    assert cg.succ_idx[cg.succ_ptr[0] : cg.succ_ptr[1]] == [1, 2]
    assert cg.priority == [7, 3, None]
    assert cg.resource_names == ["cpu", "net"] and cg.resource == [1, 0, 0]


def _mutate(data: dict, how: str) -> dict:
    if how == "cycle":
        data["edges"].append({"source": "c", "target": "r"})
    elif how == "missing_node":
        data["edges"].append({"source": "c", "target": "ghost"})
    elif how == "negative":
        data["nodes"][0]["duration"] = -1.0
    elif how == "nan":
        data["nodes"][0]["duration"] = math.nan
    elif how == "resource":
        data["nodes"][1]["resource"] = "gpu"
    elif how == "kind":
        data["nodes"][1]["kind"] = "teleport"
    elif how == "missing_field":
        del data["nodes"][1]["resource"]
    elif how == "version":
        data["graph"]["schema_version"] = 99
    elif how == "capacity":
        data["graph"]["resources"]["cpu"] = 0
    elif how == "duplicate":
        data["nodes"].append(dict(data["nodes"][0]))
    return data


@pytest.mark.parametrize(
    ("how", "expect"),
    [
        ("cycle", "cycle through node"),
        ("missing_node", "node 'ghost' does not exist"),
        ("negative", "node 'r': duration must be a finite number >= 0"),
        ("nan", "node 'r': duration"),
        ("resource", "node 'c': unknown resource 'gpu'"),
        ("kind", "node 'c': unknown kind 'teleport'"),
        ("missing_field", "node 'c': missing field 'resource'"),
        ("version", "schema_version 99 is not supported"),
        ("capacity", "resource 'cpu': capacity must be an integer >= 1"),
        ("duplicate", "node 'r': duplicate id"),
    ],
)
def test_bad_files_one_line_error(tmp_path, capsys, how, expect):
    data = _mutate(graph.to_json(small()), how)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(GraphError, match=expect):
        graph.load(p)
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(p) in err and expect in err
    assert "Traceback" not in err


def test_bad_json_names_line(tmp_path, capsys):
    p = tmp_path / "broken.json"
    p.write_text('{"graph": {},\n "nodes": [,]}')
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p}: invalid JSON at line 2" in err and err.count("\n") == 1


def test_missing_file(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_validate_ok(tmp_path, capsys):
    p = tmp_path / "g.json"
    graph.save(small(), p)
    assert main(["validate", str(p)]) == 0
    assert "ok (2 ops, 1 edges)" in capsys.readouterr().out


def test_save_refuses_invalid_and_keeps_old(tmp_path):
    p = tmp_path / "g.json"
    graph.save(small(), p)
    before = p.read_bytes()
    bad = small()
    bad.add_edge("c", "r")
    with pytest.raises(GraphError):
        graph.save(bad, p)
    assert p.read_bytes() == before
    assert [q.name for q in tmp_path.iterdir()] == ["g.json"]


def test_register_kind():
    g = small()
    graph.add_op(g, "k", "checkpoint", "cpu", 1.0)
    with pytest.raises(GraphError, match="unknown kind 'checkpoint'"):
        graph.validate(g)
    graph.register_kind("checkpoint")
    try:
        graph.validate(g)
    finally:
        graph.KINDS.discard("checkpoint")


@given(
    st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=30),
    st.integers(min_value=0, max_value=2**31),
)
def test_random_dag_roundtrip_json(durations, seed):
    g = graph.new_graph({"cpu": 1})
    for i, d in enumerate(durations):
        graph.add_op(g, f"o{i}", "compute", "cpu", d)
    dag = nx.gnp_random_graph(len(durations), 0.3, seed=seed, directed=True)
    g.add_edges_from((f"o{u}", f"o{v}") for u, v in dag.edges if u < v)
    h = graph.from_json(json.loads(json.dumps(graph.to_json(g))))
    assert nx.utils.graphs_equal(g, h)


def test_gzip_roundtrip_is_reproducible(tmp_path):
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    graph.save(small(), a)
    graph.save(small(), b)
    assert a.read_bytes() == b.read_bytes()
    assert nx.utils.graphs_equal(graph.load(a), small())


def test_corrupt_gzip_one_line(tmp_path):
    p = tmp_path / "x.json.gz"
    p.write_bytes(b"not gzip at all")
    with pytest.raises(GraphError, match=r"x\.json\.gz: "):
        graph.load(p)
