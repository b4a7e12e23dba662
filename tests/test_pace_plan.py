"""The all-reduce plan format (commsched.pace.plan): validation, round trip, errors."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsched.pace.plan import (
    PLAN_FORMAT,
    Group,
    Partition,
    Plan,
    PlanError,
    load_plan,
    save_plan,
)


def two_groups() -> Plan:
    return Plan(
        "pace",
        (
            Group((("a", 10), ("b", 6)), (Partition(0, 4, 0), Partition(4, 12, 5))),
            Group((("c", 8),), (Partition(0, 8, 2),)),
        ),
        {"workers": 4},
    )


def test_priority_order_preempts_at_partition_boundaries():
    order = [(g, p.offset) for g, p in two_groups().priority_order()]
    # group 1's partition (priority 2) runs between group 0's two partitions (0 and 5)
    assert order == [(0, 0), (1, 0), (0, 4)]


def test_round_trip_and_file(tmp_path):
    p = two_groups()
    save_plan(p, tmp_path / "p.json")
    q = load_plan(tmp_path / "p.json")
    assert q == p and q.meta == {"workers": 4}
    assert json.loads((tmp_path / "p.json").read_text())["format"] == PLAN_FORMAT


@pytest.mark.parametrize(
    "groups, expect",
    [
        ((Group((("a", 4),), (Partition(0, 3, 0),)),), "cover 3 bytes, the tensors 4"),
        ((Group((("a", 4),), (Partition(1, 3, 0),)),), "expected offset 0, got 1"),
        ((Group((("a", 4),), (Partition(0, 2, 0), Partition(1, 3, 0))),), "expected offset 2"),
        ((Group((("a", 4),), (Partition(0, 4, -1),)),), "priority >= 0"),
        ((Group((("a", 0),), (Partition(0, 1, 0),)),), "bytes 0 <= 0"),
        ((Group((), ()),), "has no tensors"),
        ((Group((("a", 4),), (Partition(0, 4, 0),)), Group((("a", 4),), (Partition(0, 4, 0),))),
         "'a' is in groups 0 and 1"),
    ],
)
def test_invalid_plans(groups, expect):
    with pytest.raises(PlanError, match=expect):
        Plan("x", groups)


@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda d: d.pop("format"), "not a plan"),
        (lambda d: d.update(schema_version=2), "schema_version 2 is not supported"),
        (lambda d: d["groups"][0]["tensors"][0].pop("bytes"), r"groups\[0\].tensors\[0\]: missing"),
        (lambda d: d["groups"][1]["partitions"][0].update(priority="1"),
         r"groups\[1\].partitions\[0\].priority: wrong type str"),
        (lambda d: d["groups"][1]["partitions"][0].update(bytes=7), "cover 7 bytes"),
    ],
)
def test_malformed_files_are_one_line_errors(tmp_path, mutate, expect):
    d = two_groups().to_dict()
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(PlanError, match=expect) as e:
        load_plan(path)
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)


def test_unreadable_and_invalid_json(tmp_path):
    with pytest.raises(PlanError, match="cannot read"):
        load_plan(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{\n  oops")
    with pytest.raises(PlanError, match="invalid JSON at line 2"):
        load_plan(tmp_path / "x.json")


def test_check_tensors_against_model():
    p = two_groups()
    p.check_tensors({"a": 10, "b": 6, "c": 8})
    with pytest.raises(PlanError, match="'d' of the model is in no group"):
        p.check_tensors({"a": 10, "b": 6, "c": 8, "d": 1})
    with pytest.raises(PlanError, match="'c' has 8 bytes, the model 9"):
        p.check_tensors({"a": 10, "b": 6, "c": 9})
    with pytest.raises(PlanError, match="'c' is not a tensor of the model"):
        p.check_tensors({"a": 10, "b": 6})


@given(st.lists(st.integers(1, 50), min_size=1, max_size=6), st.data())
def test_any_split_of_a_buffer_is_a_valid_plan(sizes, data):
    total = sum(sizes)
    cuts = sorted(data.draw(st.sets(st.integers(1, total - 1), max_size=4))) if total > 1 else []
    bounds = [0, *cuts, total]
    parts = tuple(Partition(lo, hi - lo, data.draw(st.integers(0, 9)))
                  for lo, hi in itertools.pairwise(bounds))
    plan = Plan("x", (Group(tuple((f"t{i}", s) for i, s in enumerate(sizes)), parts),))
    assert sum(p.bytes for _, p in plan.priority_order()) == total
    assert Plan.from_dict(plan.to_dict()) == plan
