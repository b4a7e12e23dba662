"""EchelonFlow abstraction and arrangement functions (Pan et al., HotNets 2022, Secs. 3-4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.echelon import arrangement as arr
from commsched.echelon.model import (
    EchelonFlow,
    echelon_tardiness,
    flow_table,
    flow_tardiness,
    objective,
)
from commsched.errors import CommschedError

# --- the abstraction (Sec. 3.2) ------------------------------------------------------------


def test_reference_is_head_release_and_ideal_follows_offsets() -> None:
    # flows listed out of release order: the head is the one released first (index 1)
    h = EchelonFlow([0, 0, 1], [1, 1, 2], [1.0, 1.0, 1.0], [4.0, 2.5, 3.0], [2.0, 0.0, 1.0])
    assert h.head == 1 and h.reference == 2.5
    assert h.ideal.tolist() == [4.5, 2.5, 3.5]


def test_tardiness_is_signed_and_echelon_tardiness_is_the_max() -> None:
    ideal = np.array([1.0, 2.0, 10.0, 0.0])
    finish = np.array([3.0, 3.0, 4.0, 1.0])
    assert flow_tardiness(finish, ideal).tolist() == [2.0, 1.0, -6.0, 1.0]
    t = echelon_tardiness(finish, ideal, [0, 0, 0, 2])
    assert t[0] == 2.0 and np.isnan(t[1]) and t[2] == 1.0
    assert objective(finish, ideal, [0, 0, 0, 2]) == 3.0
    assert objective(finish, ideal, [0, 0, 0, 2], weight=[2.0, 5.0, 3.0]) == 7.0


def test_flow_table_meta_columns() -> None:
    a = EchelonFlow([0], [1], [1.0], [1.0], [0.0], weight=2.0)
    b = EchelonFlow([1, 1], [0, 0], [1.0, 2.0], [0.0, 3.0], [0.0, 3.0])
    tab = flow_table([a, b])
    meta = tab.meta()
    assert meta["group"].tolist() == [0, 1, 1]
    assert meta["index"].tolist() == [0, 0, 1]
    assert meta["ideal"].tolist() == [1.0, 0.0, 3.0]
    assert meta["weight"].tolist() == [2.0, 1.0, 1.0]


@pytest.mark.parametrize("kwargs, msg", [
    ({"src": []}, "no flows"),
    ({"size": [1.0, 0.0]}, "positive"),
    ({"offset": [0.0]}, "differ in length"),
    ({"release": [0.0, float("nan")]}, "finite"),
    ({"weight": 0.0}, "weight"),
])
def test_bad_echelonflow_is_one_line_error(kwargs: dict, msg: str) -> None:
    base = {"src": [0, 0], "dst": [1, 1], "size": [1.0, 1.0], "release": [0.0, 0.0],
            "offset": [0.0, 1.0]}
    if kwargs.get("src") == []:
        base = {k: [] for k in base}
    base.update({k: v for k, v in kwargs.items() if k != "src"})
    with pytest.raises(CommschedError, match=msg):
        EchelonFlow(**base)


# --- arrangement functions (Sec. 4) --------------------------------------------------------


def test_eq5_coflow_and_eq6_gpipe() -> None:
    assert arr.coflow(3).tolist() == [0.0, 0.0, 0.0]
    # Eq. 6: d_0 = r, d_j = d_{j-1} + T
    assert arr.gpipe(4, 1.5).tolist() == [0.0, 1.5, 3.0, 4.5]


def test_eq7_fsdp_and_the_boundary_at_n() -> None:
    n, tf, tb = 3, 1.0, 5.0
    off = arr.fsdp(n, tf, tb)
    assert len(off) == 2 * n
    gaps = np.diff(off)
    # Eq. 7 literally: gaps T_fwd for i = 1..n-1, T_bwd for i = n..2n-1
    literal = [tf] * (n - 1) + [tb] * n
    # ours: the gap before C_n is the forward of the last layer (T_fwd); all others agree
    ours = gaps.tolist()
    assert ours[: n - 1] == literal[: n - 1] and ours[n:] == literal[n:]
    assert ours[n - 1] == tf != literal[n - 1]


def test_gpipe_from_the_stage_schedule_is_eq6() -> None:
    # equal stages: the consumer's compute time per micro-batch is T = fwd (activations)
    # and T = bwd (gradients), and the schedule-derived offsets are Eq. 6
    for h in arr.pipeline_echelonflows(3, 5, fwd=2.0, bwd=3.0, act_bytes=1.0):
        t = 2.0 if h.name.startswith("act") else 3.0
        assert np.allclose(h.offset, arr.gpipe(5, t)), h.name
        # Def. 3.1: the head flow's ideal finish time is its release (d_0 = r = s_0)
        assert h.offset[h.head] == 0.0


def test_one_f_one_b_derived_arrangement() -> None:
    # 2 stages, 3 micro-batches, F = 1, B = 2. Stage 0 (1F1B, one warm-up forward):
    # F0 [0,1], F1 [1,2], B0 waits for stage 1. Stage 1 (no warm-up): F0 [1,2], B0 [2,4],
    # F1 [4,5], B1 [5,7], F2 [7,8], B2 [8,10]. Stage 0: B0 [4,6], F2 [6,7], B1 [7,9],
    # B2 [10,12]. Activations leave stage 0 at 1, 2, 7 and are consumed at 1, 4, 7:
    # offsets 0, 3, 6 (not Eq. 6's constant T = 1); gradients leave stage 1 at 4, 7, 10,
    # consumed at 4, 7, 10: offsets 0, 3, 6.
    tl = arr.pipeline_timeline(2, 3, 1.0, 2.0, "1f1b")
    assert tl[("B", 0, 1)] == (7.0, 9.0) and tl[("B", 0, 2)] == (10.0, 12.0)
    act, grad = arr.pipeline_echelonflows(2, 3, 1.0, 2.0, 1.0, "1f1b")
    assert act.release.tolist() == [1.0, 2.0, 7.0] and act.offset.tolist() == [0.0, 3.0, 6.0]
    assert grad.release.tolist() == [4.0, 7.0, 10.0] and grad.offset.tolist() == [0, 3, 6]


def test_paradigm_flows_and_sizes() -> None:
    (ar,) = arr.dp_allreduce(4, [8.0])
    assert ar.src.tolist() == [0, 1, 2, 3] and ar.dst.tolist() == [1, 2, 3, 0]
    assert np.allclose(ar.size, 2 * 3 / 4 * 8.0)
    push0, push1, pull = arr.dp_ps(2, [1.0, 3.0], ready=[0.0, 2.0])
    assert push0.src.tolist() == [0, 1] and push0.release.tolist() == [0.0, 0.0]
    assert push1.dst.tolist() == [2, 2] and push1.release.tolist() == [2.0, 2.0]
    assert pull.src.tolist() == [2, 2] and pull.size.tolist() == [4.0, 4.0]
    assert pull.release.tolist() == [2.0, 2.0]
    tp = arr.tensor_parallel(3, [6.0, 3.0])
    assert len(tp) == 4 and all(len(h) == 6 for h in tp)
    assert np.allclose(tp[0].size, 4.0)  # 2 S / W per ordered pair
    ag, *rs = arr.fsdp_echelonflows(2, [2.0, 4.0], 1.0, 3.0)
    assert len(ag) == 2 * 2 * 2 and len(rs) == 2
    assert ag.offset.tolist() == [0, 0, 1, 1, 2, 2, 5, 5]
    assert ag.size.tolist() == [1, 1, 2, 2, 2, 2, 1, 1]  # layers 0, 1, then 1, 0


def test_pipeline_schedule_errors() -> None:
    with pytest.raises(CommschedError, match="unknown pipeline schedule"):
        arr.pipeline_timeline(2, 2, 1.0, 1.0, "zb-h1")
    with pytest.raises(CommschedError, match="2 stages"):
        arr.pipeline_timeline(1, 2, 1.0, 1.0)


# --- Table 1 -------------------------------------------------------------------------------

#: The paper's Table 1 (paradigm, Coflow compliance, EchelonFlow arrangement).
PAPER_TABLE1 = [
    ("DP - AllReduce", True, "Same flow finish time"),
    ("DP - PS", True, "Same flow finish time"),
    ("PP", False, "Staggered flow finish time"),
    ("TP", True, "Same flow finish time"),
    ("FSDP", False, "Staggered Coflow finish time"),
]


@pytest.mark.parametrize("workers, layers, micro", [(2, 1, 2), (4, 3, 4), (3, 5, 8)])
def test_table1_regenerated_from_the_arrangements(workers: int, layers: int, micro: int
                                                  ) -> None:
    tab = arr.table1(workers, layers, micro)
    got = list(tab[["paradigm", "coflow_compliance", "arrangement"]]
               .itertuples(index=False, name=None))
    assert got == PAPER_TABLE1


def test_table1_extended_row() -> None:
    row = arr.table1(extended=True).iloc[-1]
    assert row["paradigm"] == "PP - 1F1B" and not row["coflow_compliance"]
    assert row["arrangement"] == "Staggered flow finish time"


# --- Property 1 for a pipeline -------------------------------------------------------------


def consumer_end(finish: np.ndarray, t: float) -> float:
    """The consumer of a GPipe EchelonFlow: micro-batch j starts when its data has arrived
    and micro-batch j-1 is done, and takes T."""
    end = -np.inf
    for e in finish:
        end = max(end, e) + t
    return float(end)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 6), st.floats(0.1, 5.0), st.floats(0.0, 10.0),
       st.lists(st.floats(0.0, 20.0), min_size=6, max_size=6))
def test_property1_pipeline_phase_end(n: int, t: float, r: float, delays: list[float]) -> None:
    # Whatever the flows' finish times e_j >= their release r + jT, the consumer ends its
    # phase at r + |H| T + t_H (Property 1's pipeline case): with d_j = r + j T (Eq. 6),
    # the end is max_j (e_j + (|H| - j) T) = r + |H| T + max_j (e_j - d_j).
    ideal = r + arr.gpipe(n, t)
    finish = ideal + np.array(delays[:n])
    t_h = float(echelon_tardiness(finish, ideal, [0] * n)[0])
    assert consumer_end(finish, t) == pytest.approx(r + n * t + t_h)
