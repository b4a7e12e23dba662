"""Brute force over recv orders and the TIC/TAC-vs-optimum experiment."""

from __future__ import annotations

import itertools
import math

import pytest

from commsched import driver
from commsched.errors import CommschedError
from commsched.model.graph import add_op, new_graph
from commsched.results import read_metrics, read_provenance, read_table
from commsched.tictac.bruteforce import (
    MAX_RECVS,
    brute_force,
    priorities_makespan,
    random_instance,
    two_stage_instance,
)
from commsched.tictac.experiments.bruteforce import (
    BruteForceConfig,
    bruteforce_metrics,
    instances,
    main,
    run_bruteforce,
)
from commsched.tictac.order import tac, tic


def test_two_stage_by_hand():
    # r0: 3 s transfer, 1 s compute; r1: 1 s, 2 s.
    # r1 first: r1[0,1] c1[1,3] r0[1,4] c0[4,5] -> 5.
    # r0 first: r0[0,3] c0[3,4] r1[3,4] c1[4,6] -> 6.
    g = two_stage_instance([3.0, 1.0], [1.0, 2.0])
    bf = brute_force(g)
    assert bf.makespans == {("r0", "r1"): 6.0, ("r1", "r0"): 5.0}
    assert (bf.optimum, bf.worst, bf.mean, bf.frac_optimal()) == (5.0, 6.0, 5.5, 0.5)
    assert bf.best_order == ("r1", "r0")
    assert bf.consistent({"r0": 0, "r1": 0}) == [6.0, 5.0]
    assert bf.consistent({"r0": 1, "r1": 0}) == [5.0]
    assert priorities_makespan(g, tac(g)) == 5.0


def test_all_orders_enumerated():
    g = random_instance(4, 3, channels=2)
    bf = brute_force(g)
    assert len(bf.makespans) == math.factorial(4)
    assert set(bf.makespans) == set(itertools.permutations(bf.recvs))
    # Each entry is what the simulator gives that order.
    for order in list(bf.makespans)[:5]:
        assert bf.makespans[order] == priorities_makespan(
            g, {r: float(k) for k, r in enumerate(order)})
    # TIC and TAC orders are among the enumerated ones, so never below the optimum.
    for prios in (tic(g), tac(g)):
        assert priorities_makespan(g, prios) >= bf.optimum


def test_limits():
    g = new_graph({"cpu": 1})
    add_op(g, "c", "compute", "cpu", 1.0)
    with pytest.raises(CommschedError, match="recv ops"):
        brute_force(g)
    big = two_stage_instance([1.0] * (MAX_RECVS + 1), [1.0] * (MAX_RECVS + 1))
    with pytest.raises(CommschedError, match="recv ops"):
        brute_force(big)
    with pytest.raises(ValueError):
        two_stage_instance([1.0], [])
    with pytest.raises(ValueError):
        random_instance(0, 1)


def test_random_instance_reproducible():
    a, b = random_instance(6, 42, channels=2), random_instance(6, 42, channels=2)
    assert list(a.nodes(data=True)) == list(b.nodes(data=True))
    assert list(a.edges) == list(b.edges)
    assert list(random_instance(6, 43).edges) != list(a.edges)


SMALL = BruteForceConfig(sizes=(2, 3, 4), instances=2, channels=(1, 2),
                         two_stage_instances=2, seed=5)


def test_experiment_table_and_metrics():
    assert len(list(instances(SMALL))) == 3 * (2 * 2 + 2)
    df = run_bruteforce(SMALL)
    assert len(df) == 18
    tol = 1e-9
    assert (df.optimum <= df.tac * (1 + tol)).all() and (df.tac <= df.worst * (1 + tol)).all()
    assert (df.tic_best <= df.tic * (1 + tol)).all() and (df.tic <= df.tic_worst * (1 + tol)).all()
    assert (df.optimum <= df.random_mean * (1 + tol)).all()
    assert (df.lower_bound <= df.optimum * (1 + tol)).all()
    assert (df.worst <= df.upper_bound * (1 + tol)).all()
    for col in ("E_optimum", "E_tic", "E_tac", "E_random"):
        assert df[col].between(0, 1).all()
    assert (df.E_optimum >= df.E_tac - tol).all()
    two = df[df.family == "two_stage"]
    assert ((two.tac_over_opt - 1).abs() < tol).all()  # Johnson: TAC optimal
    m = bruteforce_metrics(df)
    assert m["tictac_bruteforce.two_stage.tac_frac_optimal"] == 1.0
    assert m["tictac_bruteforce.dag.instances"] == 12.0
    assert 1.0 <= m["tictac_bruteforce.dag.tac_over_opt_mean"] <= m[
        "tictac_bruteforce.dag.tac_over_opt_max"]


def test_main_writes_files(tmp_path, capsys):
    t, mt = tmp_path / "t.csv", tmp_path / "m.csv"
    args = ["--sizes", "2", "3", "--instances", "1", "--channels", "1", "--two-stage-instances",
            "1", "--seed", "0", "--table", str(t), "--metrics", str(mt)]
    assert main(args) == 0
    assert len(read_table(t)) == 4
    assert read_provenance(t)["config"]["sizes"] == [2, 3]
    assert "tictac_bruteforce.dag.tac_frac_optimal" in read_metrics([mt])
    bad = ["--sizes", "12", *args[2:]]
    assert main(bad) == 2
    assert "tictac_bruteforce.sizes.0: 12 is greater than the maximum of 9" in \
        capsys.readouterr().err


def test_schema_caps_sizes_at_max_recvs():
    sizes = driver.schema()["properties"]["tictac_bruteforce"]["properties"]["sizes"]
    assert sizes["items"]["maximum"] == MAX_RECVS
