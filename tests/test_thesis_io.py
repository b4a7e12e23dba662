"""Thesis CSV graph / device reader and writer (commsched.io.thesis)."""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pytest

from commsched.errors import CommschedError
from commsched.io.thesis import (
    Devices,
    colocation_groups,
    read_devices,
    read_graph,
    to_op_graph,
    write_devices,
    write_graph,
)
from commsched.model.graph import compile_graph, validate
from commsched.sim import check_schedule, simulate

DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "thesis-data").resolve()
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"thesis sample data not found at {DATA} (../shared/thesis-data)"
)

HEAD6 = "Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize, #operations\n"
HEAD9 = ("Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize, #operations, "
         "RAM storage,Device constraint ,name\n")
DEVHEAD = "Id,RAM,#operations,commnication speed,type\n"


def write(tmp_path: Path, text: str, name: str = "g.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def same_graph(a: nx.DiGraph, b: nx.DiGraph) -> bool:
    return (list(a.nodes) == list(b.nodes) and set(a.edges) == set(b.edges)
            and all(a.nodes[n] == b.nodes[n] for n in a))


# --- the published samples ---------------------------------------------------------------

@needs_data
def test_sample_graph_6_columns():
    g = read_graph(DATA / "sample_graph.csv")
    assert g.graph["columns"] == 6
    assert g.number_of_nodes() == 22  # FORMAT.md: 22 nodes
    # line 2 of the file: "0,2;1;4;3,,3,681,250"
    assert set(g.successors(0)) == {1, 2, 3, 4}
    assert list(g.predecessors(0)) == []
    a = g.nodes[0]
    assert (a["tensor_size"], a["operations"], a["ram"], a["constraint"], a["name"]) == \
        (681, 250, None, "NO", None)
    # 0 lists 3 and 3 lists 0;2, so {0, 2, 3} is one group (transitive closure) with id 0;
    # node 2 also lists 21, so 21 joins it too.
    assert {n for n in g if g.nodes[n]["colocation"] == 0} == {0, 2, 3, 21}
    assert nx.is_directed_acyclic_graph(g)


@needs_data
def test_cnn_graph_9_columns():
    g = read_graph(DATA / "convolutional_network_graph.csv")
    assert g.graph["columns"] == 9
    assert g.number_of_nodes() == 346  # FORMAT.md: 346 lines (the thesis counts 347)
    # line 2: "294,296;295;329,,46,86,53,49,NO,Variable_4/Adam_1"
    a = g.nodes[294]
    assert (a["tensor_size"], a["operations"], a["ram"], a["constraint"], a["name"]) == \
        (86, 53, 49, "NO", "Variable_4/Adam_1")
    assert set(g.successors(294)) == {295, 296, 329}
    constraints = [c for _, c in g.nodes(data="constraint")]
    assert constraints.count("CPU") == 5 and constraints.count("GPU") == 5


@needs_data
@pytest.mark.parametrize("name,n,types", [("toyDevices.csv", 10, ["GPU", "GPU", "CPU"]),
                                          ("devices7.csv", 7, ["GPU", "CPU", "CPU"]),
                                          ("devices50.csv", 50, ["CPU", "CPU", "CPU"])])
def test_sample_devices(name, n, types):
    d = read_devices(DATA / name)
    assert d.n == n and d.type[:3] == types
    for i in range(n):
        assert d.rate(i, i) == math.inf
        for j in range(n):
            assert d.rate(i, j) == d.rate(j, i) > 0


@needs_data
def test_devices7_values():
    d = read_devices(DATA / "devices7.csv")
    # line 2: "0,833333300,12,10;22;26;18;41;12,GPU"; line 7: "5,227272700,44,42,CPU"
    assert (d.ram[0], d.speed[0], d.type[0]) == (833333300, 12, "GPU")
    assert [d.rate(0, j) for j in range(1, 7)] == [10, 22, 26, 18, 41, 12]
    assert d.rate(6, 5) == 42
    assert d.transfer_time(84, 5, 6) == 2.0  # 84 / 42
    assert d.compute_time(24, 0) == 2.0  # 24 / 12
    assert d.transfer_time(84, 3, 3) == 0.0


@needs_data
@pytest.mark.parametrize("name", ["sample_graph.csv", "convolutional_network_graph.csv"])
def test_graph_round_trip(tmp_path, name):
    g = read_graph(DATA / name)
    write_graph(g, tmp_path / "out.csv")
    assert same_graph(read_graph(tmp_path / "out.csv"), g)


@needs_data
def test_devices_round_trip(tmp_path):
    d = read_devices(DATA / "devices50.csv")
    write_devices(d, tmp_path / "d.csv")
    assert read_devices(tmp_path / "d.csv") == d


@needs_data
def test_to_op_graph_simulates():
    g = read_graph(DATA / "convolutional_network_graph.csv")
    og = to_op_graph(g, speed=2.0)
    validate(og)
    assert og.nodes["294"]["duration"] == 26.5  # 53 operations / speed 2
    assert og.edges["294", "296"]["bytes"] == 86
    s = simulate(og)
    check_schedule(compile_graph(og), s)
    # one device, capacity 1: the ops run back to back
    assert s.makespan == pytest.approx(sum(a["operations"] for _, a in g.nodes(data=True)) / 2)


# --- hand-written files --------------------------------------------------------------------

def test_meta_line_and_empty_fields(tmp_path):
    p = write(tmp_path, "Meta,1,80,100\n" + HEAD9 + "1,2,,,5,6,7,GPU,a\n2,,1,,8,9,10,NO,\n")
    g = read_graph(p)
    assert list(g.edges) == [(1, 2)]
    assert g.nodes[1]["constraint"] == "GPU" and g.nodes[2]["name"] == ""
    assert g.nodes[2]["colocation"] == 2  # no partner: its own group


def test_colocation_groups_transitive():
    assert colocation_groups([(5, 3), (3, 9), (7, 8)], [3, 4, 5, 7, 8, 9]) == \
        {3: 3, 4: 4, 5: 3, 7: 7, 8: 7, 9: 3}


@pytest.mark.parametrize("body,where,what", [
    ("0,1,,,5,6\n1,,x,,5,6\n", ":3: column 3", "not an integer: 'x'"),
    ("0,1,,,5,6\n1,,0,,5\n", ":3:", "5 columns, expected 6"),
    ("0,1,,,-5,6\n1,,0,,5,6\n", ":2: column 5", "must be >= 0, got -5"),
    ("0,1,,,5,6\n1,,,,5,6\n", ":2: column 2", "node 1 (line 3) does not list 0"),
    ("0,,,,5,6\n1,,0,,5,6\n", ":3: column 3", "node 0 (line 2) does not list 1"),
    ("0,7,,,5,6\n", ":2: column 2", "names node 7, which has no line"),
    ("0,,,9,5,6\n", ":2: column 4", "names node 9"),
    ("0,0,0,,5,6\n", ":2: column 2", "self-loop"),
    ("0,1,1,,5,6\n1,0,0,,5,6\n", "column 2", "cycle through node"),
    ("0,,,,5,6\n0,,,,5,6\n", ":3: column 1", "node 0 appears twice"),
])
def test_graph_errors_6(tmp_path, body, where, what):
    p = write(tmp_path, HEAD6 + body)
    with pytest.raises(CommschedError) as e:
        read_graph(p)
    msg = str(e.value)
    assert str(p) in msg and where in msg and what in msg and "\n" not in msg


def test_graph_unknown_constraint(tmp_path):
    p = write(tmp_path, HEAD9 + "0,,,,5,6,7,FPGA,a\n")
    with pytest.raises(CommschedError, match=r":2: column 8 .*unknown device constraint 'FPGA'"):
        read_graph(p)


@pytest.mark.parametrize("text,what", [
    ("", "empty file"),
    ("a,b,c\n0,1,2\n", "header has 3 columns, expected 6 or 9"),
])
def test_graph_bad_header(tmp_path, text, what):
    with pytest.raises(CommschedError, match=what):
        read_graph(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(CommschedError, match="cannot read"):
        read_graph(tmp_path / "nope.csv")


@pytest.mark.parametrize("body,what", [
    ("0,10,5,3;4,CPU\n1,10,5,6,GPU\n", ":2: column 1 .*implies 3 devices .*no line for device 2"),
    ("0,10,5,3;4,CPU\n2,10,5,,GPU\n", ":2: column 1 .*no line for device 1"),
    ("0,10,5,3;4,CPU\n1,10,5,6,GPU\n2,10,5,,QPU\n", ":4: column 5 .*unknown device type 'QPU'"),
    ("0,10,5,3,CPU\n1,10,5,,GPU\n2,10,5,,GPU\n", ":2: column 4 .*lists 1 rates, expected 2"),
    ("0,10,0,3,CPU\n1,10,5,,GPU\n", ":2: column 3 .*must be >= 1, got 0"),
    ("0,-1,5,3,CPU\n1,10,5,,GPU\n", ":2: column 2 .*must be >= 0, got -1"),
    ("0,10,5,0,CPU\n1,10,5,,GPU\n", ":2: column 4 .*must be >= 1, got 0"),
    ("0,10,5,3,CPU\n1,10,5,GPU\n", ":3: .*4 columns, expected 5"),
    ("0,10,5,3,CPU\n0,10,5,,GPU\n", ":3: column 1 .*device 0 appears twice"),
    ("", "no device lines"),
])
def test_device_errors(tmp_path, body, what):
    p = write(tmp_path, DEVHEAD + body, "d.csv")
    with pytest.raises(CommschedError, match=what) as e:
        read_devices(p)
    assert str(p) in str(e.value)


def test_devices_out_of_order_rows(tmp_path):
    d = read_devices(write(tmp_path, DEVHEAD + "1,20,7,,GPU\n0,10,5,3,CPU\n", "d.csv"))
    assert d == Devices(ids=[0, 1], ram=[10, 20], speed=[5, 7], type=["CPU", "GPU"],
                        rates=[[math.inf, 3.0], [3.0, math.inf]])
