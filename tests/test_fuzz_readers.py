"""Every reader of the CLI fed mutated versions of a valid input (issue 22).

Each test writes one valid input, checks that the command accepts it, then feeds it
mutations (type swaps, NaN / inf / negative / huge numbers, deletions, deep nesting,
truncation, gzip / binary / UTF-16 encodings; :mod:`fuzz_cli`). Every outcome must be an
exit 0 or an exit 2 with one stderr line naming the file, within 10 s, with no traceback
and the output file untouched on failure; mutations that are invalid by construction (a
bad number in a numeric field) must be rejected. The examples are fixed (derandomized).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_cli import (
    FUZZ,
    SENTINEL,
    check_handled,
    check_rejected,
    guarded_output,
    json_mutation,
    numeric_swap,
    run,
    text_mutation,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import mlp_trace

import commsched.claims
import commsched.echelon.coflow
import commsched.pace.fusion  # noqa: F401
from commsched.cli import main
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.model.graph import to_json
from commsched.trace.synthetic import par_n

pytestmark = pytest.mark.filterwarnings("error")  # a warning is a second stderr line


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _attempt(d: Path, name: str, data: bytes, argv: list[str], out: str,
             must_reject: bool = False) -> None:
    src = d / name
    src.write_bytes(data)
    dst = guarded_output(d / out)
    o = run(argv)
    names = [str(src)]
    if must_reject:
        check_rejected(o, names, argv)
    else:
        check_handled(o, names, argv)
    if o.rc != 0:
        assert dst.read_bytes() == SENTINEL, f"{argv}: a failed run touched {dst}"


def _accepted(argv: list[str]) -> None:
    o = run(argv)
    assert o.rc == 0, o.stderr


# --- op graph JSON (simulate) and traced graph (view ps) -------------------------------

GRAPH = to_json(par_n(2))
TRACE = to_json(mlp_trace())
#: name -> (valid document, command writing the output "<name>.out", numeric fields)
GRAPHS: dict[str, tuple[dict[str, Any], list[str], list[tuple[Any, ...]]]] = {
    "g.json": (GRAPH, ["simulate", "g.json", "--chrome-trace"],
               [("nodes", i, "duration") for i in range(len(GRAPH["nodes"]))]
               + [("graph", "resources", r) for r in GRAPH["graph"]["resources"]]),
    "t.json": (TRACE, ["view", "ps", "t.json", "-o"],
               [("nodes", i, f) for i in range(len(TRACE["nodes"]))
                for f in ("out_bytes", "duration")]
               + [("nodes", i, "samples", 0) for i, n in enumerate(TRACE["nodes"])
                  if n["samples"]]
               + [("edges", i, "bytes") for i in range(len(TRACE["edges"]))]
               + [("graph", "variables", v, "bytes") for v in TRACE["graph"]["variables"]]
               + [("graph", "meta", "batch")]),
}


def _graph_argv(d: Path, name: str) -> list[str]:
    words = GRAPHS[name][1]
    return [str(d / w) if w == name else w for w in words] + [str(d / f"{name}.out")]


@pytest.mark.parametrize("name", GRAPHS)
def test_valid_graphs_accepted(d: Path, name: str) -> None:
    (d / name).write_text(json.dumps(GRAPHS[name][0]))
    assert run(_graph_argv(d, name)).rc == 0


@pytest.mark.parametrize("name", GRAPHS)
@FUZZ
@given(data=st.data())
def test_graph_mutations(d: Path, name: str, data: st.DataObject) -> None:
    mutated = data.draw(json_mutation(GRAPHS[name][0]))
    _attempt(d, name, mutated, _graph_argv(d, name), f"{name}.out")


@pytest.mark.parametrize("name", GRAPHS)
@FUZZ
@given(data=st.data())
def test_graph_bad_numbers_rejected(d: Path, name: str, data: st.DataObject) -> None:
    doc, _, fields = GRAPHS[name]
    _attempt(d, name, data.draw(numeric_swap(doc, fields)), _graph_argv(d, name),
             f"{name}.out", must_reject=True)


# --- raw trace (trace --check) --------------------------------------------------------

def _raw() -> dict[str, Any]:
    events = [[n["id"], n["op_type"], "cpu", 0, 0, 0, 0, round(n["samples"][0] * 1e9)]
              for n in TRACE["nodes"] if n["samples"]]
    return {"format": "commsched-raw-trace", "version": 1, "meta": TRACE["graph"]["meta"],
            "fields": ["node", "op_type", "device", "thread", "start_ns", "op_start_ns",
                       "op_end_ns", "end_ns"], "iterations": [{"wall_s": 1.0, "events": events}]}


RAW = _raw()


def test_valid_raw_trace_accepted(d: Path) -> None:
    (d / "t.json").write_text(json.dumps(TRACE))
    (d / "r.json").write_text(json.dumps(RAW))
    _accepted(["trace", "--check", str(d / "t.json"), str(d / "r.json")])


@FUZZ
@given(data=json_mutation(RAW))
def test_raw_trace_mutations(d: Path, data: bytes) -> None:
    (d / "t.json").write_text(json.dumps(TRACE))
    _attempt(d, "r.json", data, ["trace", "--check", str(d / "t.json"), str(d / "r.json")],
             "unused.out")


# --- priorities (JSON and TSV) --------------------------------------------------------

PRIOS = {"priorities": {"recv_0": 0, "recv_1": 1}}


def _prio_argv(d: Path, name: str) -> list[str]:
    (d / "p.graph.json").write_text(json.dumps(GRAPH))
    return ["simulate", str(d / "p.graph.json"), "--priorities", str(d / name),
            "--chrome-trace", str(d / "p.trace.json")]


def test_valid_priorities_accepted(d: Path) -> None:
    (d / "p.json").write_text(json.dumps(PRIOS))
    (d / "p.tsv").write_text("recv_0\t0\nrecv_1\t1\n")
    assert run(_prio_argv(d, "p.json")).rc == 0
    assert run(_prio_argv(d, "p.tsv")).rc == 0


@FUZZ
@given(data=json_mutation(PRIOS))
def test_priority_json_mutations(d: Path, data: bytes) -> None:
    _attempt(d, "p.json", data, _prio_argv(d, "p.json"), "p.trace.json")


@FUZZ
@given(data=text_mutation("recv_0\t0\nrecv_1\t1\n", "\t"))
def test_priority_tsv_mutations(d: Path, data: bytes) -> None:
    _attempt(d, "p.tsv", data, _prio_argv(d, "p.tsv"), "p.trace.json")


# --- thesis CSVs (place) --------------------------------------------------------------

THESIS_GRAPH = ("Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize, #operations,"
                " RAM storage,Device constraint ,name\n"
                "0,1;2,,,10,5,1,NO,a\n1,3,0,2,20,7,1,NO,b\n2,3,0,1,5,3,1,CPU,c\n3,,1;2,,1,4,1,NO,d\n")
DEVICES = "Id,RAM,#operations,commnication speed,type\n0,100,10,5,CPU\n1,100,20,,GPU\n"


def _place_argv(d: Path) -> list[str]:
    return ["place", str(d / "G.csv"), str(d / "D.csv"), "--partitioner", "heft",
            "--scheduler", "fifo", "--chrome-trace", str(d / "place.trace.json")]


def test_valid_thesis_files_accepted(d: Path) -> None:
    (d / "G.csv").write_text(THESIS_GRAPH)
    (d / "D.csv").write_text(DEVICES)
    _accepted(_place_argv(d))


@FUZZ
@given(data=text_mutation(THESIS_GRAPH, ","))
def test_thesis_graph_mutations(d: Path, data: bytes) -> None:
    (d / "D.csv").write_text(DEVICES)
    _attempt(d, "G.csv", data, _place_argv(d), "place.trace.json")


@FUZZ
@given(data=text_mutation(DEVICES, ","))
def test_thesis_devices_mutations(d: Path, data: bytes) -> None:
    (d / "G.csv").write_text(THESIS_GRAPH)
    _attempt(d, "D.csv", data, _place_argv(d), "place.trace.json")


# --- Coflow traces (echelon replay) ---------------------------------------------------

COFLOWS = "4 3\n1 0 2 0 1 1 2:4.0\n2 5 1 3 2 0:1.0 1:2.0\n3 9 1 2 1 3:0.5\n"


def _coflow_argv(d: Path) -> list[str]:
    return ["echelon", "replay", str(d / "c.txt"), "-o", str(d / "c.csv")]


@pytest.fixture(scope="module")
def compiled(d: Path) -> None:
    """One replay outside the time limit: the flow simulator's kernels are compiled (numba)
    on first use, which is start-up cost, not the handling of the input under test."""
    (d / "warm.txt").write_text(COFLOWS)
    assert main(["echelon", "replay", str(d / "warm.txt"), "-o", str(d / "warm.csv")]) == 0


def test_valid_coflow_trace_accepted(d: Path, compiled: None) -> None:
    (d / "c.txt").write_text(COFLOWS)
    _accepted(_coflow_argv(d))


@FUZZ
@given(data=st.one_of(text_mutation(COFLOWS, " "),
                      st.sampled_from([b"1000000000000 1\n1 0 1 0 1 1:1.0\n", b"4 0\n",
                                       b"0 1\n1 0 1 0 1 0:1.0\n"])))
def test_coflow_trace_mutations(d: Path, compiled: None, data: bytes) -> None:
    _attempt(d, "c.txt", data, _coflow_argv(d), "c.csv")


# --- all-reduce plans (pace simulate) -------------------------------------------------

@pytest.fixture(scope="module")
def plan(d: Path) -> dict[str, Any]:
    (d / "mlp.json").write_text(json.dumps(TRACE))
    o = run(["pace", "plan", str(d / "mlp.json"), "--workers", "2", "--bandwidth", "10",
             "--no-slot-guidance", "-o", str(d / "plan.json")])
    assert o.rc == 0, o.stderr
    data: dict[str, Any] = json.loads((d / "plan.json").read_text())
    return data


def _sim_argv(d: Path) -> list[str]:
    return ["pace", "simulate", str(d / "pl.json"), str(d / "mlp.json"), "--workers", "2",
            "--bandwidth", "10", "--table", str(d / "pl.csv")]


@FUZZ
@given(data=st.data())
def test_plan_mutations(d: Path, plan: dict[str, Any], data: st.DataObject) -> None:
    _attempt(d, "pl.json", data.draw(json_mutation(plan)), _sim_argv(d), "pl.csv")


# --- claims (YAML) and metrics tables -------------------------------------------------

CLAIMS = {"claims": [{"id": "c1", "paper": "p", "where": "Sec. 1", "statement": "s",
                      "kind": "paper", "metric": "m.x", "paper_value": 1.0,
                      "compare": {"op": "approx", "abs_tol": 0.1}, "target": "t"}]}
METRICS = "# config: {}\nmetric,value\nm.x,1.05\nm.y,3\n"


def _claims_argv(d: Path) -> list[str]:
    return ["claims", "--claims", str(d / "c.yaml"), "--metrics", str(d / "m.csv"),
            "--md", str(d / "claims.md"), "--csv", str(d / "claims.csv")]


def test_valid_claims_accepted(d: Path) -> None:
    (d / "c.yaml").write_text(yaml.safe_dump(CLAIMS))
    (d / "m.csv").write_text(METRICS)
    _accepted(_claims_argv(d))


@FUZZ
@given(data=json_mutation(CLAIMS))  # JSON is YAML
def test_claims_mutations(d: Path, data: bytes) -> None:
    (d / "m.csv").write_text(METRICS)
    _attempt(d, "c.yaml", data, _claims_argv(d), "claims.md")


@FUZZ
@given(data=text_mutation(METRICS, ","))
def test_metrics_mutations(d: Path, data: bytes) -> None:
    (d / "c.yaml").write_text(yaml.safe_dump(CLAIMS))
    _attempt(d, "m.csv", data, _claims_argv(d), "claims.md")


# --- all-reduce measurement (pace plan --cost fit) ------------------------------------

MEASUREMENT = "workers,rank,size_bytes,rep,seconds\n" + "".join(
    f"2,{r},{s},{k},{1e-4 + s * 1e-9 + k * 1e-6}\n"
    for s in (4096, 65536, 1048576) for k in range(3) for r in range(2))


def _fit_argv(d: Path) -> list[str]:
    (d / "mlp.json").write_text(json.dumps(TRACE))
    return ["pace", "plan", str(d / "mlp.json"), "--workers", "2", "--bandwidth", "10",
            "--cost", "fit", "--measurement", str(d / "meas.csv"), "--no-slot-guidance",
            "-o", str(d / "fit.plan.json")]


def test_valid_measurement_accepted(d: Path) -> None:
    (d / "meas.csv").write_text(MEASUREMENT)
    _accepted(_fit_argv(d))


@FUZZ
@given(data=text_mutation(MEASUREMENT, ","))
def test_measurement_mutations(d: Path, data: bytes) -> None:
    _attempt(d, "meas.csv", data, _fit_argv(d), "fit.plan.json")


# --- configuration files (YAML) -------------------------------------------------------

@settings(FUZZ, max_examples=10)  # the pure-Python YAML parser is slow on deep nesting
@given(data=json_mutation({"live": {"hosts": {"ps": ["a:1"], "worker": ["b:2"]}},
                           "seed": 0}))
def test_config_yaml_mutations(d: Path, data: bytes) -> None:
    """The config reader of every experiment (:func:`read_yaml`) decodes or names the file."""
    p = d / "config.yaml"
    p.write_bytes(data)
    try:
        read_yaml(p)
    except CommschedError as e:
        assert str(e).startswith(str(p)) and "\n" not in str(e)


# --- sizes from flags -----------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--slot", "--bin-ms"])
def test_slot_and_bin_counts_bounded(d: Path, plan: dict[str, Any], flag: str) -> None:
    """``pace plan --slot`` / ``pace simulate --bin-ms`` tiny: refused before allocating."""
    if flag == "--slot":
        argv = ["pace", "plan", str(d / "mlp.json"), "--workers", "2", "--bandwidth", "10",
                "--no-slot-guidance", "--slot", "1e-9", "-o", str(d / "tiny.plan.json")]
    else:
        argv = ["pace", "simulate", str(d / "plan.json"), str(d / "mlp.json"), "--workers",
                "2", "--bandwidth", "10", "--usage", str(d / "tiny.csv"), "--bin-ms", "1e-9"]
    o = run(argv)
    check_rejected(o, [flag], argv)
    assert "exceeds the bound of 1000000" in o.stderr
