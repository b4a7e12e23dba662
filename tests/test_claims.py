"""Claims machinery and provenance-carrying result tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from commsched.claims import evaluate, load_claims
from commsched.cli import main
from commsched.errors import CommschedError
from commsched.results import read_metrics, read_provenance, read_table, write_metrics, write_table

ROOT = Path(__file__).resolve().parent.parent


def claim(**kw):
    base = {
        "id": "c1", "paper": "tictac", "where": "Sec. 6", "statement": "s",
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
    assert "2 claims: 1 reproduced, 0 differs, 1 pending" in capsys.readouterr().out
    assert "| c1 | tictac |" in md.read_text()
    df = read_table(csv)
    assert list(df["status"]) == ["reproduced", "pending"]
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
