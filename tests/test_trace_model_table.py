"""TicTac's model table from model counts and the paper's values (no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commsched.errors import CommschedError
from commsched.model import graph
from commsched.results import read_metrics, read_table
from commsched.tictac.experiments import model_table as mt
from commsched.trace import zoo

ROOT = Path(__file__).resolve().parents[1]
COUNTS = ROOT / "data" / "models" / "counts.json"
PAPER = ROOT / "papers" / "model_table.yaml"


def _counts(tmp: Path, data: object) -> str:
    p = tmp / "counts.json"
    p.write_text(json.dumps(data))
    return str(p)


def test_table_and_metrics(tmp_path: Path) -> None:
    counts = {
        "resnet50_v1": {"params": 108, "param_bytes": 102121888, "ops_infer": 1834,
                        "ops_train": 6072, "size": 112},
        "thesis_cnn": {"params": 8, "param_bytes": 13098536, "ops_infer": 44,
                       "ops_train": 128, "size": 28},
    }
    table, metrics = tmp_path / "t.csv", tmp_path / "m.csv"
    rc = mt.main(["--counts", _counts(tmp_path, counts), "--paper", str(PAPER),
                  "--table", str(table), "--metrics", str(metrics)])
    assert rc == 0
    t = read_table(table)
    assert t["model"].tolist() == ["resnet50_v1", "thesis_cnn"]  # zoo order
    r = t.iloc[0]
    assert (r["params"], r["param_mib"], r["paper_params"], r["paper_param_mib"]) == (
        108, 97.39, 108, 97.39)
    assert r["paper_ops_train"] == 2096 and r["paper_batch"] == 32
    assert pd_isna(t.iloc[1]["paper_ops_train"])  # thesis_cnn is not in TicTac's table
    assert "slim" in r["note"]
    m = read_metrics([metrics])
    assert m["model.resnet50_v1.param_mib"][0] == 97.39
    assert m["model.thesis_cnn.ops_train"][0] == 128
    assert len(m) == 8


def pd_isna(x: object) -> bool:
    import pandas as pd

    return bool(pd.isna(x))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"resnet9": {}}, "unknown model 'resnet9'"),
        ({"vgg16": {"params": 1}}, "model 'vgg16': missing param_bytes, ops_infer, ops_train"),
        ([1, 2], "expected an object"),
    ],
)
def test_bad_counts(tmp_path: Path, data: object, message: str) -> None:
    with pytest.raises(CommschedError, match=message):
        mt.load_counts(_counts(tmp_path, data))


def test_bad_paper(tmp_path: Path) -> None:
    p = tmp_path / "paper.yaml"
    p.write_text("models: {vgg16: {flops: 1}}\n")
    with pytest.raises(CommschedError, match="columns must be among"):
        mt.load_paper(str(p))
    assert mt.main(["--counts", str(tmp_path / "none.json"), "--paper", str(p),
                    "--table", "t", "--metrics", "m"]) == 2


def test_paper_table_is_complete() -> None:
    """SysML Table 1 has ten rows and five columns, all known; spot values from the paper."""
    paper = mt.load_paper(str(PAPER))
    assert set(paper) == {s.name for s in zoo.MODELS.values() if "tictac" in s.families}
    assert all(set(row) == set(mt.COLUMNS) and None not in row.values()
               for row in paper.values())
    assert paper["vgg16"] == {"params": 32, "param_mib": 527.79, "ops_infer": 388,
                              "ops_train": 758, "batch": 32}
    assert paper["alexnet_v2"]["batch"] == 512 and paper["resnet101_v2"]["ops_train"] == 5380
    assert all(row["ops_train"] > row["ops_infer"] for row in paper.values())


@pytest.mark.skipif(not COUNTS.exists(), reason="model counts not committed yet")
def test_committed_counts() -> None:
    counts = mt.load_counts(str(COUNTS))
    assert set(counts) == set(zoo.names())
    t = mt.model_table(counts, mt.load_paper(str(PAPER))).set_index("model")
    assert t.loc["vgg16", "param_mib"] == 527.79 and t.loc["vgg16", "params"] == 32
    # TicTac's Table 1 models have the paper's tensors (tests/test_trace_slim.py derives
    # them from the TF-slim architectures).
    paper = mt.load_paper(str(PAPER))
    assert all(t.loc[m, "params"] == row["params"] for m, row in paper.items())
    assert t.loc["resnet50_v1", "param_mib"] == 97.39
    assert t.loc["inception_v3", "param_mib"] == 103.55
    assert (t["ops_train"] > t["ops_infer"]).all()
    # The committed TensorFlow traces have exactly the counted ops (the PyTorch traces,
    # named *-torch-*, count autograd ops and are checked in tests/test_torch_trace.py).
    traces = sorted((ROOT / "data" / "traces").glob("*-b*.json.gz"))
    traces = [t for t in traces if "-torch-" not in t.name]
    assert traces
    for trace in traces:
        g = graph.load(trace)
        meta = g.graph["meta"]
        assert meta.get("framework", "tensorflow") == "tensorflow", trace.name
        assert g.number_of_nodes() == counts[meta["model"]][f"ops_{meta['mode']}"], trace.name
