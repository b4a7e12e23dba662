"""The placement headline metrics on hand-made tables with known answers, and every metric
named in papers/claims/placement.yaml produced by them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from commsched.claims import load_claims
from commsched.placement import PARTITIONERS
from commsched.placement.experiments import thesis as exp

ROOT = Path(__file__).resolve().parents[1]

# makespan factor per partitioner (Hashing and Batch Split worst, MITE twice HEFT/CP/ICP,
# DFS 10% above CP), per scheduler (PCT best, FIFO worst), traffic and partitioning time
MAKESPAN = {"hashing": 9, "heft": 2, "batch_split": 8, "icp": 2, "cp": 1.5, "mite": 4,
            "dfs": 1.65}
SCHED = {"fifo": 1.2, "pct": 1.0, "msr": 1.1}
TRAFFIC = {"hashing": 9, "heft": 8, "batch_split": 1, "icp": 4, "cp": 7, "mite": 2, "dfs": 3}
PART_S = {"hashing": 0.01, "heft": 9, "batch_split": 1, "icp": 5, "cp": 2, "mite": 3,
          "dfs": 4}


def table(graphs: dict[str, tuple[int, int, float]], runs: int = 2) -> pd.DataFrame:
    """graphs: name -> (nodes, edges, makespan scale); two semantics, published x 1.5."""
    rows = []
    for g, (nodes, edges, scale) in graphs.items():
        for sem, f in (("thesis", 1.0), ("published-code", 1.5)):
            for r in range(runs):
                for p in PARTITIONERS:
                    for s, fs in SCHED.items():
                        rows.append({"graph": g, "run": r, "semantics": sem, "partitioner": p,
                                     "scheduler": s, "makespan": MAKESPAN[p] * fs * scale * f,
                                     "traffic": TRAFFIC[p] * edges, "nodes": nodes,
                                     "partition_s": PART_S[p] * nodes})
    return pd.DataFrame(rows)


def synthetic() -> pd.DataFrame:
    return table({f"graph {k}": (t["nodes"], t["edges"], 10.0 if k == 3 else 1.0)
                  for k, t in exp.TABLE71.items()})


def tables(syn: pd.DataFrame) -> dict[str, float]:
    """The headline metrics of ``syn`` with hand-made TensorFlow, 7-device, Gantt and Table
    7.1 tables."""
    tf = table({"cnn": (128, 200, 1.0), "rnn": (1032, 2000, 1.0),
                "dynamic_rnn": (147, 300, 1.0)})
    seven = table({"graph 2": (1800, 2500, 1.0), "graph 3": (750, 5000, 0.5),
                   "rnn": (1032, 2000, 1.0), "dynamic_rnn": (147, 300, 1.0)})
    # Batch Split on the dynamic RNN: 8 / 1.5 (best CP) on 50 devices; make it 12 / 1.5 on 7
    bs = (seven.graph == "dynamic_rnn") & (seven.partitioner == "batch_split")
    seven.loc[bs, "makespan"] *= 1.5
    gantt = pd.DataFrame(
        [{"graph": g, "partitioner": "mite", "scheduler": "pct", "device": d, "start": 0.0,
          "end": 6.0 if d == 0 else 1.0, "executable": ex}
         for g, ex in (("graph 2", 10), ("graph 3", 2)) for d in range(7)])
    t71 = pd.DataFrame({"rel_err": [0.01, -0.03, 0.0]})
    return exp.headline_metrics(syn, tf, seven, gantt, t71)


@pytest.fixture(scope="module")
def metrics() -> dict[str, float]:
    return tables(synthetic())


def test_known_answers(metrics):
    expect = {
        "placement.table71.max_abs_rel_err": 0.03,
        "placement.synthetic.pct_best_frac": 1.0,
        "placement.synthetic.fifo_worst_frac": 1.0,
        "placement.synthetic.traffic_scheduler_spread": 0.0,
        "placement.synthetic.hashing_batch_split_worst_frac": 1.0,
        "placement.synthetic.mite_over_heft_cp_icp_g12": 4 / (5.5 / 3),
        "placement.synthetic.mite_over_heft_cp_icp_g56": 4 / (5.5 / 3),
        "placement.synthetic.traffic_g1_lowest_g6_highest": 1.0,
        "placement.synthetic.traffic_order_g1_g2_g345_g6": 1.0,  # Table 7.1's edge order
        "placement.synthetic.traffic_hashing_heft_cp_worst_frac": 1.0,
        "placement.synthetic.heft_slowest_frac": 1.0,
        "placement.synthetic.heft_time_nodes_rank_corr": 1.0,
        "placement.tensorflow.heft_over_mite_min": 2 / 4 - 1,
        "placement.tensorflow.heft_over_mite_max": 2 / 4 - 1,
        "placement.tensorflow.published.heft_over_mite_min": 2 / 4 - 1,
        "placement.tensorflow.hashing_worst_frac": 1.0,
        "placement.tensorflow.mite_or_cp_best_frac": 1.0,
        "placement.tensorflow.dfs_over_best_of_mite_cp": 1.1,
        "placement.tensorflow.icp_worse_than_cp_frac": 1.0,
        "placement.tensorflow.cp_mite_dfs_beat_heft_frac": 2 / 3,  # MITE does not
        "placement.tensorflow.traffic_mite_bs_dfs_best_frac": 1.0,
        "placement.tensorflow.traffic_hashing_heft_worst_frac": 1.0,
        "placement.tensorflow.traffic_icp_below_cp_frac": 1.0,
        "placement.tensorflow.icp_slowest_frac": 0.0,  # HEFT is
        "placement.tensorflow.heft_second_slowest_frac": 0.0,
        "placement.seven.g3_over_g2_makespan": 0.5,
        "placement.synthetic.g3_over_g2_makespan": 10.0,
        "placement.seven.g3_over_g2_traffic": 2.0,
        "placement.seven.g2_over_g3_executable": 5.0,
        "placement.seven.batch_split_7_over_50_dynamic_rnn": 1.5,
        "placement.seven.mite_g2_busiest_share": 6 / 12,
        "placement.best_other_scheduler_over_pct": 1.1,  # MSR's factor
        "placement.synthetic.msr_beats_pct_runs_g12_mite_hashing_frac": 0.0,
        "placement.batch_split_traffic_share_tf_over_synthetic": 1.0,
        "placement.tensorflow.batch_split_faster_than_mite_dfs_frac": 1.0,
        "placement.synthetic.mite_dfs_g6_time_per_node_ratio": 1.0,
        "placement.heft_time_share_tf_over_synthetic": 1.0,
    }
    for k, v in expect.items():
        assert metrics[k] == pytest.approx(v), k
    hashing = PART_S["hashing"] / sorted(PART_S.values())[3]
    assert metrics["placement.tensorflow.hashing_time_over_median"] == pytest.approx(hashing)


def test_traffic_order_fails_when_a_middle_graph_passes_graph_2():
    syn = synthetic()
    syn.loc[syn.graph == "graph 4", "traffic"] /= 2  # 21243 edges: between graphs 1 and 2
    m = tables(syn)
    assert m["placement.synthetic.traffic_order_g1_g2_g345_g6"] == 0.0
    assert m["placement.synthetic.traffic_g1_lowest_g6_highest"] == 1.0


def test_msr_runs_graph6_and_heft_time():
    syn = synthetic()
    th = syn.semantics == "thesis"
    # one of 8 (graph 1-2 x MITE, Hashing x 2 runs) runs where MSR beats PCT
    one = (th & (syn.graph == "graph 1") & (syn.partitioner == "mite") & (syn.run == 0)
           & (syn.scheduler == "msr"))
    syn.loc[one, "makespan"] *= 0.5
    # MITE three times slower per node on graph 6, DFS unchanged: (3 + 1) / 2
    g6 = th & (syn.graph == "graph 6") & (syn.partitioner == "mite")
    syn.loc[g6, "partition_s"] *= 3
    # HEFT twice as slow on every synthetic graph: 18 over the median 3 (MITE), but over 4
    # (DFS) on graph 6, where MITE now takes 9; on the TensorFlow graphs 9 / 3
    syn.loc[syn.partitioner == "heft", "partition_s"] *= 2
    m = tables(syn)
    synthetic_share = (5 * 18 / 3 + 18 / 4) / 6
    assert m["placement.heft_time_share_tf_over_synthetic"] == pytest.approx(
        (9 / 3) / synthetic_share)
    assert m["placement.synthetic.msr_beats_pct_runs_g12_mite_hashing_frac"] == 1 / 8
    assert m["placement.synthetic.mite_dfs_g6_time_per_node_ratio"] == pytest.approx(2.0)


def test_every_claim_metric_is_produced(metrics):
    """Every metric of the simulated rows (target ``placement``); the live rows' metrics
    (target ``placement_live``) are checked by the live run's test."""
    claims = load_claims(ROOT / "papers" / "claims" / "placement.yaml")
    assert {c["target"] for c in claims} == {"placement", "placement_live"}
    simulated = [c for c in claims if c["target"] == "placement"]
    missing = {c["metric"] for c in simulated} - set(metrics)
    assert not missing
    assert all(c["paper"] == "laich" for c in claims)
