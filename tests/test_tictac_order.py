"""TIC (Alg. 2) and TAC (Alg. 3) of TicTac: golden cases, Johnson optimality, invariants."""

from __future__ import annotations

import json
import math

import networkx as nx
from hypothesis import example, given, settings
from hypothesis import strategies as st

from commsched.cli import main
from commsched.io.priorities import load_priorities
from commsched.model.graph import add_op, compile_graph, new_graph, save
from commsched.sim import check_schedule, simulate
from commsched.tictac.bruteforce import brute_force, random_instance, two_stage_instance
from commsched.tictac.order import eq6_before, johnson_key, tac, tic
from commsched.tictac.properties import exact_op_properties, op_properties
from commsched.trace.synthetic import par_n, seq_n


def makespan(g: nx.DiGraph, prios: dict[str, float]) -> float:
    s = simulate(g, priorities=prios)
    check_schedule(compile_graph(g, prios), s)
    return s.makespan


def recvs_of(g: nx.DiGraph) -> list[str]:
    return [n for n, a in g.nodes(data=True) if a["kind"] == "recv"]


def fig2_graph(recv2_first_in_graph: bool = True) -> nx.DiGraph:
    """TicTac Fig. 2's situation: op1 needs recv1; op2 needs op1 and recv2. Unit times.

    The figure has no numbers; one time unit for every op keeps the arithmetic visible.
    """
    g = new_graph({"net": 1, "cpu": 1})
    order = ["recv2", "recv1"] if recv2_first_in_graph else ["recv1", "recv2"]
    for r in order:
        add_op(g, r, "recv", "net", 1.0)
    add_op(g, "op1", "compute", "cpu", 1.0)
    add_op(g, "op2", "compute", "cpu", 1.0)
    g.add_edges_from([("recv1", "op1"), ("op1", "op2"), ("recv2", "op2")])
    return g


def test_fig2_two_orders():
    g = fig2_graph()
    # Good order recv1, recv2: recv1 [0,1]; op1 [1,2] overlaps recv2 [1,2]; op2 [2,3] -> 3.
    assert makespan(g, {"recv1": 0, "recv2": 1}) == 3.0
    # Bad order recv2, recv1: recv2 [0,1]; recv1 [1,2]; op1 [2,3]; op2 [3,4] -> 4.
    assert makespan(g, {"recv2": 0, "recv1": 1}) == 4.0
    # TAC: P(recv1) = 1 (op1 needs only recv1), P(recv2) = 0, M = 1 for both, so Eq. (6)
    # prefers recv1 strictly: min(P2, M1) = 0 < min(P1, M2) = 1.
    assert tac(g) == {"recv1": 0, "recv2": 1}
    assert makespan(g, tac(g)) == 3.0
    # TIC sees only M+: op2 needs both recvs, M+ = 2 for both -> one shared priority;
    # the simulator then sends in graph order, here recv2 first: TIC cannot tell them apart.
    assert tic(g) == {"recv2": 0, "recv1": 0}
    assert makespan(g, tic(g)) == 4.0


def two_recvs(ma: float, pa: float, mb: float, pb: float) -> nx.DiGraph:
    """SysML Sec. 4.3, case 1: recvs A and B on one channel, each feeding its own compute."""
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "B", "recv", "net", mb)  # B first in graph order: a graph-order tie picks B
    add_op(g, "A", "recv", "net", ma)
    add_op(g, "a", "compute", "cpu", pa)
    add_op(g, "b", "compute", "cpu", pb)
    g.add_edges_from([("A", "a"), ("B", "b")])
    return g


def test_sec42_case_second_transfer_hidden():
    # P_A >= M_B: while a computes, B's transfer is hidden. M_A=1, P_A=3, M_B=2, P_B=1.
    g = two_recvs(1, 3, 2, 1)
    # A then B: A[0,1] a[1,4] B[1,3] b[4,5] -> M_A + max(P_A, M_B) + P_B = 1 + 3 + 1 = 5.
    assert makespan(g, {"A": 0, "B": 1}) == 5.0
    # B then A: B[0,2] b[2,3] A[2,3] a[3,6] -> 2 + max(1, 1) + 3 = 6.
    assert makespan(g, {"B": 0, "A": 1}) == 6.0
    # Eq. (6): min(P_B, M_A) = 1 < min(P_A, M_B) = 2 -> A first.
    assert eq6_before(1, 3, 2, 1) and not eq6_before(2, 1, 1, 3)
    assert tac(g) == {"A": 0, "B": 1}


def test_sec42_case_second_transfer_exposed():
    # P_A < M_B: B's transfer outlasts a. M_A=2, P_A=1, M_B=3, P_B=2.
    g = two_recvs(2, 1, 3, 2)
    # A then B: A[0,2] a[2,3] B[2,5] b[5,7] -> 2 + max(1, 3) + 2 = 7.
    assert makespan(g, {"A": 0, "B": 1}) == 7.0
    # B then A: B[0,3] b[3,5] A[3,5] a[5,6] -> 3 + max(2, 2) + 1 = 6.
    assert makespan(g, {"B": 0, "A": 1}) == 6.0
    # Eq. (6): min(P_A, M_B) = 1 < min(P_B, M_A) = 2 -> B first.
    assert eq6_before(3, 2, 2, 1)
    assert tac(g) == {"B": 0, "A": 1}


def test_eq6_tie_goes_to_johnson_key_before_m_plus():
    """Module docstring: A (M = P = 1) and B (M = 1, P = 2) tie under Eq. (6); the paper
    would compare M+, we take B by Johnson's key. Here M+ would favour A (A and x share
    a two-recv op with M+ = 2, B's M+ is 3), yet B goes first, and B first is no worse."""
    g = new_graph({"net": 1, "cpu": 1})
    for r in "ABC":
        add_op(g, r, "recv", "net", 1.0)
    add_op(g, "a", "compute", "cpu", 1.0)
    add_op(g, "b", "compute", "cpu", 2.0)
    add_op(g, "ac", "compute", "cpu", 0.5)
    add_op(g, "abc", "compute", "cpu", 0.5)
    g.add_edges_from([("A", "a"), ("B", "b"), ("A", "ac"), ("C", "ac"),
                      ("A", "abc"), ("B", "abc"), ("C", "abc")])
    assert not eq6_before(1, 1, 1, 2) and not eq6_before(1, 2, 1, 1)  # a tie under Eq. (6)
    order = tac(g)
    assert min(order, key=order.__getitem__) == "B"
    assert makespan(g, order) <= makespan(g, {"A": 0, "B": 1, "C": 2})


def test_printed_alg3_comparator_is_reversed():
    """Alg. 3 as printed (A <- min(P_A, M_B), B <- min(P_B, M_A), A first iff A < B)
    picks the other recv than Eq. (6) whenever the minima differ; Eq. (6) is the one that
    gives the shorter makespan (the case-1 example)."""
    def printed(m_a: float, p_a: float, m_b: float, p_b: float) -> bool:
        return min(p_a, m_b) < min(p_b, m_a)

    g = two_recvs(1, 3, 2, 1)
    assert eq6_before(1, 3, 2, 1) and not printed(1, 3, 2, 1)
    assert makespan(g, {"A": 0, "B": 1}) < makespan(g, {"B": 0, "A": 1})


def test_m_plus_breaks_eq6_ties():
    # C, A, B (graph order), unit recvs; x needs {A, B}, y needs {A, B, C}. All P = 0, so
    # Eq. (6) ties everywhere (min(0, M) = 0); M+(A) = M+(B) = M(x) = 2 < M+(C) = M(y) = 3.
    g = new_graph({"net": 1, "cpu": 1})
    for r in "CAB":
        add_op(g, r, "recv", "net", 1.0)
    add_op(g, "x", "compute", "cpu", 1.0)
    add_op(g, "y", "compute", "cpu", 1.0)
    g.add_edges_from([("A", "x"), ("B", "x"), ("A", "y"), ("B", "y"), ("C", "y")])
    # Round 1 picks A (M+ 2, before B in graph order); then x needs only B: P(B) = 1 beats
    # C's P = 0 under Eq. (6); C last.
    assert tac(g) == {"A": 0, "B": 1, "C": 2}
    # A[0,1] B[1,2] C[2,3], x[2,3], y[3,4] -> 4; graph order C, A, B would give
    # C[0,1] A[1,2] B[2,3], x[3,4], y[4,5] -> 5.
    assert makespan(g, tac(g)) == 4.0
    assert makespan(g, {"C": 0, "A": 1, "B": 2}) == 5.0
    assert tic(g) == {"A": 0, "B": 0, "C": 2}


def test_toys():
    # Seq-N: recv_0 and recv_1 share M+ = 2 (comp_1 needs both), recv_i has M+ = i + 1.
    g = seq_n(6)
    t = tic(g)
    assert t == {"recv_0": 0, "recv_1": 0, "recv_2": 2, "recv_3": 3, "recv_4": 4, "recv_5": 5}
    assert makespan(g, t) == 7.0  # N + 1, the best (commsched.trace.synthetic)
    assert list(tac(g)) == [f"recv_{i}" for i in range(6)]
    assert makespan(g, tac(g)) == 7.0
    # Par-N: no op needs two recvs, every M+ is infinite: one shared priority.
    assert set(tic(par_n(5)).values()) == {0}


def test_no_recvs_and_time_override():
    g = new_graph({"cpu": 1})
    add_op(g, "c", "compute", "cpu", 1.0)
    assert tic(g) == {} and tac(g) == {}
    # An oracle that makes A's compute short flips the Sec. 4.3 case-1 decision.
    g = two_recvs(1, 3, 2, 1)
    assert tac(g, time={"a": 0.5}) == {"B": 0, "A": 1}


def test_johnson_key_refines_eq5():
    vals = [0.0, 1.0, 2.0, 3.0]
    for ma in vals:
        for pa in vals:
            for mb in vals:
                for pb in vals:
                    if eq6_before(ma, pa, mb, pb):
                        assert johnson_key(ma, pa) < johnson_key(mb, pb)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6).flatmap(
    lambda n: st.lists(st.integers(1, 60), min_size=2 * n, max_size=2 * n, unique=True)))
def test_tac_optimal_on_two_stage_distinct(times):
    """Eq. (6) is Johnson's rule: on two-stage instances TAC is optimal (brute force)."""
    n = len(times) // 2
    g = two_stage_instance([float(t) for t in times[:n]], [float(t) for t in times[n:]])
    bf = brute_force(g)
    assert makespan(g, tac(g)) == bf.optimum


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6).flatmap(
    lambda n: st.lists(st.integers(0, 4), min_size=2 * n, max_size=2 * n)))
def test_tac_optimal_on_two_stage_with_ties(times):
    """Any Johnson order is optimal, also with equal times and zero times."""
    n = len(times) // 2
    g = two_stage_instance([float(t) for t in times[:n]], [float(t) for t in times[n:]])
    assert makespan(g, tac(g)) == brute_force(g).optimum


instances = st.builds(random_instance, st.integers(1, 9), st.integers(0, 10**6),
                      st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(instances)
def test_priorities_cover_recvs_and_are_deterministic(g):
    recvs = recvs_of(g)
    t, a = tic(g), tac(g)
    assert set(t) == set(recvs) and set(a) == set(recvs)
    assert sorted(a.values()) == list(range(len(recvs)))
    # TIC priorities are competition ranks: p is the count of recvs with a smaller one.
    for p in t.values():
        assert p == sum(1 for q in t.values() if q < p)
    h = nx.node_link_graph(nx.node_link_data(g, edges="edges"), edges="edges")
    assert tic(h) == t and tac(h) == a
    assert list(tac(g).items()) == list(a.items())


@settings(max_examples=40, deadline=None)
@given(instances)
def test_tac_choice_never_strictly_beaten(g):
    """Replaying TAC with Alg. 1 from scratch: each chosen recv is undominated under Eq. (6)
    and has the smallest M+ among the recvs with the same Johnson key."""
    order = list(tac(g))
    for k, chosen in enumerate(order):
        left = order[k:]
        p = op_properties(g, outstanding=left)
        for other in left[1:]:
            assert not eq6_before(p.M[other], p.P[other], p.M[chosen], p.P[chosen])
            if johnson_key(p.M[other], p.P[other]) == johnson_key(p.M[chosen], p.P[chosen]):
                assert p.M_plus[chosen] <= p.M_plus[other]


def _inf_if_none(v: int | None) -> float:
    return math.inf if v is None else v


def tac_from_scratch(g: nx.DiGraph) -> dict[str, int]:
    """Alg. 3 literally: Alg. 1 rerun from scratch every round, same selection rule.

    With exact properties: rounded to floats, two recvs can tie where TAC's exact values
    differ (hypothesis found such an instance).
    """
    left = recvs_of(g)
    out = {}
    while left:
        p = exact_op_properties(g, outstanding=left)
        best = min(left, key=lambda r: (johnson_key(p.M[r], p.P[r]),
                                        _inf_if_none(p.M_plus[r]), left.index(r)))
        out[best] = len(out)
        left.remove(best)
    return out


def tic_from_scratch(g: nx.DiGraph) -> dict[str, int]:
    """Alg. 2 literally: unit recv times, zero elsewhere, rank by M+."""
    unit = {n: 1.0 if a["kind"] == "recv" else 0.0 for n, a in g.nodes(data=True)}
    mp = op_properties(g, time=unit).M_plus
    return {r: sum(1 for q in mp.values() if q < mp[r]) for r in mp}


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10**6), st.integers(1, 3))
@example(n=35, seed=14779, channels=1)  # exact M+ differ where their floats tie
def test_incremental_orders_equal_literal_algorithms(n, seed, channels):
    g = random_instance(n, seed, channels=channels)
    assert tac(g) == tac_from_scratch(g)
    assert tic(g) == tic_from_scratch(g)


def test_cli_order(tmp_path, capsys):
    g = random_instance(5, 7, channels=2)
    save(g, tmp_path / "g.json")
    assert main(["order", "--algo", "tac", str(tmp_path / "g.json"), "-o",
                 str(tmp_path / "p.json")]) == 0
    assert load_priorities(tmp_path / "p.json") == {k: float(v) for k, v in tac(g).items()}
    assert main(["order", "--algo", "tic", str(tmp_path / "g.json"), "-o",
                 str(tmp_path / "p.tsv"), "--format", "tsv"]) == 0
    lines = (tmp_path / "p.tsv").read_text().splitlines()
    assert {ln.split("\t")[0]: float(ln.split("\t")[1]) for ln in lines} == tic(g)
    capsys.readouterr()
    # A graph without recvs, a missing file: one line on stderr, exit 2, no output file.
    empty = new_graph({"cpu": 1})
    add_op(empty, "c", "compute", "cpu", 1.0)
    save(empty, tmp_path / "e.json")
    for bad in ("e.json", "missing.json"):
        assert main(["order", "--algo", "tic", str(tmp_path / bad), "-o",
                     str(tmp_path / "x.json")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error" in err
    assert not (tmp_path / "x.json").exists()
    assert main(["order", "--algo", "nope", str(tmp_path / "g.json"), "-o", "x"]) == 2


def test_json_priorities_are_numbers(tmp_path):
    g = seq_n(3)
    save(g, tmp_path / "g.json")
    main(["order", "--algo", "tic", str(tmp_path / "g.json"), "-o", str(tmp_path / "p.json")])
    data = json.loads((tmp_path / "p.json").read_text())
    assert data == {"priorities": {"recv_0": 0.0, "recv_1": 0.0, "recv_2": 2.0}}
