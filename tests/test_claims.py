"""Claims machinery and provenance-carrying result tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from commsched.claims import (
    BOUNDS_LOCK,
    ClaimResult,
    bound_changes,
    compare_claims,
    evaluate,
    load_claims,
    read_bounds,
    render_markdown,
)
from commsched.cli import main
from commsched.errors import CommschedError
from commsched.results import read_metrics, read_provenance, read_table, write_metrics, write_table

ROOT = Path(__file__).resolve().parent.parent


def claim(**kw):
    base = {
        "id": "c1", "paper": "tictac", "kind": "paper", "where": "Sec. 6", "statement": "s",
        "metric": "m.a", "paper_value": 1.0, "compare": {"op": "approx", "abs_tol": 0.1},
        "target": "toys",
    }
    base.update(kw)
    return base


def write_claims_file(tmp_path, claims):
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump({"claims": claims}))
    return p


def test_statuses(tmp_path):
    m = tmp_path / "m.csv"
    write_metrics({"m.a": 1.05, "m.b": 3.0, "m.c": 0.5}, m, {"seed": 1})
    claims = [
        claim(),
        claim(id="c2", metric="m.b", compare={"op": "ge", "value": 4.0}),
        claim(id="c3", metric="m.c", paper_value="qualitative", compare={"op": "between",
                                                                         "value": [0, 1]}),
        claim(id="c4", metric="m.missing"),
        claim(id="c5", metric="m.b", paper_value=2.0, compare={"op": "approx", "rel_tol": 0.6},
              note="ours uses fewer iterations"),
    ]
    res = {r.id: r for r in evaluate(load_claims(write_claims_file(tmp_path, claims)), [m])}
    assert res["c1"].status == "reproduced" and res["c1"].ours == pytest.approx(1.05)
    assert res["c2"].status == "differs" and "3 < 4" in res["c2"].reason
    assert res["c3"].status == "reproduced"
    assert res["c4"].status == "pending" and res["c4"].ours is None
    assert res["c5"].status == "reproduced" and "fewer iterations" in res["c5"].reason


@pytest.mark.parametrize(
    ("bad", "expect"),
    [
        ({"compare": {"op": "nearly"}}, "compare/op"),
        ({"id": "Bad Id"}, "claims/0/id"),
        ({"paper_value": "text", "compare": {"op": "ge"}}, "needs a numeric value"),
        ({"compare": {"op": "between", "value": 1}}, r"needs value: \[lo, hi\]"),
    ],
)
def test_bad_claims_file(tmp_path, capsys, bad, expect):
    p = write_claims_file(tmp_path, [claim(**bad)])
    with pytest.raises(CommschedError, match=expect):
        load_claims(p)
    assert main(["claims", "--claims", str(p), "--metrics", "--md", str(tmp_path / "c.md"),
                 "--csv", str(tmp_path / "c.csv")]) == 2
    assert not (tmp_path / "c.md").exists()
    assert capsys.readouterr().err.count("\n") == 1


def test_duplicate_claim_and_metric(tmp_path):
    with pytest.raises(CommschedError, match="appears twice"):
        load_claims(write_claims_file(tmp_path, [claim(), claim()]))
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = write_claims_file(tmp_path / "one", [claim()])
    two = write_claims_file(tmp_path / "two", [claim(id="c2"), claim()])
    with pytest.raises(CommschedError, match=r"two/claims.yaml: claim 'c1' appears twice \(also"):
        load_claims([one, two])
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_metrics({"x": 1}, a)
    write_metrics({"x": 2}, b)
    with pytest.raises(CommschedError, match="also in"):
        read_metrics([a, b])


def test_cli_writes_tables(tmp_path, capsys):
    m = tmp_path / "m.csv"
    write_metrics({"m.a": 1.0}, m)
    p = write_claims_file(tmp_path, [claim(), claim(id="c2", metric="m.z")])
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    assert main(["claims", "--claims", str(p), "--metrics", str(m), "--md", str(md),
                 "--csv", str(csv)]) == 0
    assert ("2 claims: 1 reproduced, 0 differs, 1 pending (paper: 1 reproduced, 0 differs, "
            "1 pending; ours: 0 reproduced") in capsys.readouterr().out
    assert "| c1 | tictac |" in md.read_text()
    df = read_table(csv)
    assert list(df["status"]) == ["reproduced", "pending"]
    assert list(df["kind"]) == ["paper", "paper"]
    assert read_provenance(csv)["commsched_version"]


def test_table_provenance_roundtrip(tmp_path):
    p = tmp_path / "t.csv"
    df = pd.DataFrame({"a": [1.5, 2.5], "b": ["x", "y"]})
    write_table(df, p, {"bandwidth": 1e9, "models": ["vgg16"]})
    pd.testing.assert_frame_equal(read_table(p), df)
    prov = read_provenance(p)
    assert prov["config"] == {"bandwidth": 1e9, "models": ["vgg16"]}
    assert set(prov) == {"commsched_version", "git_revision", "created_utc", "config"}


def test_repository_claims_file_is_valid():
    claims = load_claims(sorted((ROOT / "papers" / "claims").glob("*.yaml")))
    assert all(c["target"] for c in claims)


def test_claim_without_kind_is_one_line_error(tmp_path, capsys):
    c = claim()
    del c["kind"]
    p = write_claims_file(tmp_path, [c])
    with pytest.raises(CommschedError, match=r"claims/0: 'kind' is a required property"):
        load_claims(p)
    assert main(["claims", "--claims", str(p), "--metrics", "--md", str(tmp_path / "c.md"),
                 "--csv", str(tmp_path / "c.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'kind' is a required property" in err
    assert not (tmp_path / "c.md").exists()
    with pytest.raises(CommschedError, match=r"claims/0/kind: 'theirs' is not one of"):
        load_claims(write_claims_file(tmp_path, [claim(kind="theirs")]))


def result(id_, paper, kind, status):
    return ClaimResult(id_, paper, kind, "Sec. 1", "s", 1.0,
                       None if status == "pending" else 1.0, status, "r", "t")


def test_render_counts_paper_rows_per_paper_and_lists_ours_and_checks_apart():
    md = render_markdown([
        result("a1", "pace", "paper", "reproduced"),
        result("a2", "pace", "paper", "differs"),
        result("a3", "pace", "ours", "reproduced"),
        result("b1", "tictac", "paper", "pending"),
        result("b2", "tictac", "check", "reproduced"),
        result("b3", "tictac", "ours", "differs"),
    ])
    assert "6 claims: 3 paper, 2 ours, 1 check." in md
    assert "| pace | 2 | 1 | 1 | 0 |" in md  # a3 (ours) not counted
    assert "| tictac | 1 | 0 | 0 | 1 |" in md  # b2, b3 not counted
    assert "| all | 3 | 1 | 1 | 1 |" in md
    _, paper, ours, check = md.split("\n## ")
    assert (paper.splitlines()[0], ours.splitlines()[0], check.splitlines()[0]) == (
        "The papers' claims", "Our claims", "Checks")
    assert "3 claims (statements" in paper and "1 reproduced, 1 differs, 1 pending" in paper
    assert "2 claims (our own" in ours and "1 reproduced, 1 differs, 0 pending" in ours
    assert "1 claims (our own sanity" in check and "1 reproduced, 0 differs, 0 pending" in check
    assert ("| a1 |" in paper and "| a3 |" in ours and "| b3 |" in ours and "| b2 |" in check
            and "| a3 |" not in paper + check and "| b2 |" not in paper + ours)


def claims_csv(path, rows):
    """A claims table with rows (id, status, ours)."""
    write_table(pd.DataFrame([{"id": i, "paper": "p", "kind": "paper", "status": s, "ours": v}
                              for i, s, v in rows]), path)
    return path


def test_compare_equal_and_within_tolerance(tmp_path, capsys):
    rows = [("a", "reproduced", 1.0), ("b", "pending", None), ("c", "differs", 0.0)]
    ref = claims_csv(tmp_path / "ref.csv", rows)
    ours = claims_csv(tmp_path / "ours.csv", [("a", "reproduced", 1.0 + 1e-12), *rows[1:]])
    assert compare_claims(ref, ours) == ([], 3)
    assert main(["claims", "compare", "--reference", str(ref), "--csv", str(ours)]) == 0
    assert "all 3 claims equal the reference" in capsys.readouterr().out


def test_compare_lists_each_differing_row(tmp_path, capsys):
    ref = claims_csv(tmp_path / "ref.csv", [
        ("same", "reproduced", 2.0), ("status", "reproduced", 1.0), ("value", "differs", 10.0),
        ("small", "differs", 10.0), ("now-run", "pending", None), ("gone", "differs", 3.0),
    ])
    ours = claims_csv(tmp_path / "ours.csv", [
        ("same", "reproduced", 2.0), ("status", "differs", 1.0), ("value", "differs", 11.0),
        ("small", "differs", 10.01), ("now-run", "reproduced", 0.5), ("new", "pending", None),
    ])
    diffs, n = compare_claims(ref, ours, rel_tol=0.01)
    assert n == 7
    assert [d.line for d in diffs] == [
        "status: status reproduced -> differs",
        "value: value 10 -> 11 (relative change 0.091 > 0.01)",
        "now-run: status pending -> reproduced; value – -> 0.5",
        "new: not in the reference (pending)",
        "gone: only in the reference (differs)",
    ]
    assert main(["claims", "compare", "--reference", str(ref), "--csv", str(ours)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "small: value 10 -> 10.01 (relative change 0.001 > 1e-09)" in out
    assert out[-1].startswith("6 of 7 claims differ from the reference")


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("id,status\na,reproduced\n", "missing column 'ours'"),
        ("id,status,ours\na,reproduced,1\na,differs,2\n", "claim 'a' appears twice"),
        ("id,status,ours\na,fine,1\n", "column 'status', row 1: 'fine' is not one of"),
        ("id,status,ours\na,reproduced,lots\n", "column 'ours', row 1: 'lots' is not a number"),
    ],
)
def test_compare_bad_input(tmp_path, capsys, content, expect):
    ref = claims_csv(tmp_path / "ref.csv", [("a", "reproduced", 1.0)])
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    with pytest.raises(CommschedError, match=expect):
        compare_claims(ref, bad)
    for argv in (["--csv", str(bad), "--reference", str(ref)],
                 ["--csv", str(ref), "--reference", str(bad)],
                 ["--csv", str(ref), "--reference", str(tmp_path / "missing.csv")]):
        assert main(["claims", "compare", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("commsched claims: error:")
    assert main(["claims", "compare", "--reference", str(ref), "--rel-tol", "nan"]) == 2
    assert "--rel-tol: must be a finite number >= 0" in capsys.readouterr().err


def test_bounds_equal_the_stored_copy():
    """Bounds before results: every row's comparison equals papers/claims/bounds.lock.json."""
    claims = load_claims(sorted((ROOT / "papers" / "claims").glob("*.yaml")))
    changes = bound_changes(claims, read_bounds(ROOT / BOUNDS_LOCK))
    assert not changes, (
        f"{len(changes)} claims rows differ from the stored bounds {BOUNDS_LOCK}:\n  "
        + "\n  ".join(changes)
        + "\nIf the change is meant (a bound fixed from the paper, not from our number), run "
          "`commsched claims bounds` and commit the lock file with it, so the reviewer sees "
          "the change.")


def test_bounds_lock_lists_changed_new_and_removed_rows(tmp_path, capsys):
    f = write_claims_file(tmp_path, [claim(), claim(id="c2")])
    lock = tmp_path / "bounds.json"
    assert main(["claims", "bounds", "--claims", str(f), "--lock", str(lock)]) == 0
    assert "bounds of 2 rows stored (new file)" in capsys.readouterr().out
    assert bound_changes(load_claims(f), read_bounds(lock)) == []
    f = write_claims_file(tmp_path, [
        claim(compare={"op": "approx", "abs_tol": 0.2}, kind="check"),
        claim(id="c3", metric="m.b"),
    ])
    assert bound_changes(load_claims(f), read_bounds(lock)) == [
        'c1: kind "paper" -> "check"; compare {"abs_tol": 0.1, "op": "approx"} -> '
        '{"abs_tol": 0.2, "op": "approx"}',
        "c3: new row",
        "c2: removed",
    ]
    assert main(["claims", "bounds", "--claims", str(f), "--lock", str(lock)]) == 0
    out = capsys.readouterr().out
    assert "c2: removed" in out and "(3 changed)" in out
    assert bound_changes(load_claims(f), read_bounds(lock)) == []
    lock.write_text('{"c1": {"metric": "m.a"}}')
    with pytest.raises(CommschedError, match="not a bounds file"):
        read_bounds(lock)
    assert main(["claims", "bounds", "--claims", str(f), "--lock", str(lock)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
