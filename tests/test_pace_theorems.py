"""PACE's Theorem 1, Lemma 2 and Theorem 3 as counted by the solvers experiment: the counts
find nothing on the real code and find every case when the code they check is broken."""

from __future__ import annotations

import random

import pytest

from commsched.model.traced import load_trace
from commsched.pace import fusion
from commsched.pace.experiments import theorems
from commsched.pace.experiments.theorems import (
    lemma2_counts,
    set_partitions,
    theorem1_counts,
    theorem3_counts,
)
from commsched.pace.model import PaceModel, window


def test_set_partitions_are_the_bell_numbers_and_distinct():
    assert [sum(1 for _ in set_partitions(n)) for n in range(1, 7)] == [1, 2, 5, 15, 52, 203]
    seen = {tuple(map(tuple, p)) for p in set_partitions(4)}
    assert len(seen) == 15 and ((0,), (1, 2, 3)) in seen and ((0, 1, 2, 3),) in seen


def test_theorem1_holds_on_a_trace_and_a_wrong_reduction_is_caught(monkeypatch):
    w = window(load_trace("data/traces/thesis_cnn-train-b8.json.gz"))
    assert theorem1_counts(w, random.Random(0), draws=4) == (4, 0)
    # an objective without the tails L_i is not the DAG's end
    monkeypatch.setattr(PaceModel, "iteration_time",
                        lambda self, ends: max([self.compute_only_s, *ends]))
    assert theorem1_counts(w, random.Random(0), draws=4) == (4, 4)


def test_lemma2_holds_and_a_non_adjacent_fusion_is_caught(monkeypatch):
    assert lemma2_counts([3, 0, 7, 7, 1]) == (52, 0)
    real = fusion.fuse

    def swapped(model, groups):  # fuse the chain in reverse: the last-ready ops first
        rev = PaceModel(tuple(reversed(model.ops)), model.compute_only_s, model.n_compute)
        return real(rev, groups)

    monkeypatch.setattr(theorems, "fuse", swapped)
    groupings, bad = lemma2_counts([0, 1, 2])
    assert groupings == 5 and bad >= 1


def test_theorem3_holds_and_an_unbalanced_split_is_caught(monkeypatch):
    assert theorem3_counts([4, 1, 1, 1, 4]) == (5, 0)

    def greedy(self, r):  # one long first group, then singletons
        return [(0, self.n - r), *((i, i) for i in range(self.n - r + 1, self.n))]

    monkeypatch.setattr(fusion.MaxMinTable, "groups", greedy)
    # R = 2: {4,1,1,1},{4} has min 4 < 5 ({4,1},{1,1,4}); R = 3: min 1 < 3; R = 1, 4, 5 agree
    assert theorem3_counts([4, 1, 1, 1, 4]) == (5, 2)


@pytest.mark.parametrize("sizes", [[1], [2, 2], [5, 1, 1, 1, 1, 1, 5, 3]])
def test_theorem3_on_edge_chains(sizes):
    assert theorem3_counts(sizes) == (len(sizes), 0)
