"""The PACE model experiment: Table II analog, tensor sizes, solver agreement."""

from __future__ import annotations

import json

from commsched.pace.experiments.model import main, solver_rows, table_rows
from commsched.results import read_metrics


def test_table2_and_tensor_sizes_of_vgg16():
    df, m = table_rows(["data/traces/vgg16-train-b2.json.gz"])
    assert m["pace.table2.vgg16.allreduce_ops"] == 32
    assert round(m["pace.table2.vgg16.params_M"], 1) == 138.4
    assert m["pace.tensors.vgg16.min_bytes"] == 64 * 4  # conv1_1 bias
    assert m["pace.tensors.vgg16.max_bytes"] == 25088 * 4096 * 4  # fc6 kernel
    assert m["pace.tensors.vgg16.second_bytes"] == 4096 * 4096 * 4  # fc7 kernel
    assert m["pace.tensors.vgg16.frac_below_1MB"] == 20 / 32  # 16 biases + 4 small kernels
    assert list(df["model"]) == ["vgg16"]
    # MXNet's granularity (tests/test_pace_operators.py derives it by hand): 38 + 38
    assert m["pace.table2.vgg16.mxnet_ops"] == 76 and m["pace.table2.vgg16.mxnet_forward_ops"] == 38
    assert df["mxnet_forward"][0].startswith("Activation:15 Convolution:13 Pooling:5")


def test_table2_rows_of_sockeye_symbols(tmp_path, capsys):
    symbols = ["data/models/sockeye/seq2seq_sockeye.json.gz",
               "data/models/sockeye/transformer_sockeye.json.gz"]
    t, mt = tmp_path / "t.csv", tmp_path / "m.csv"
    assert main(["table", "--traces", "data/traces/thesis_cnn-train-b8.json.gz",
                 "--symbols", *symbols, "--table", str(t), "--metrics", str(mt)]) == 0
    m = {k: v for k, (v, _) in read_metrics([mt]).items()}
    # Table II: 164 all-reduce operators and 1061 computation operators
    assert m["pace.table2.transformer_sockeye.allreduce_ops"] == 164
    assert m["pace.table2.transformer_sockeye.mxnet_ops"] == 1063
    assert m["pace.table2.transformer_sockeye.mxnet_forward_ops"] == 558
    assert round(m["pace.table2.transformer_sockeye.params_M"], 2) == 93.29
    # Table II's Seq2Seq: 32 all-reduce operators and 293 computation operators
    assert m["pace.table2.seq2seq_sockeye.allreduce_ops"] == 32
    assert m["pace.table2.seq2seq_sockeye.mxnet_ops"] == 172 + 143
    assert "pace.table2.thesis_cnn.allreduce_ops" in m
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [], "heads": []}')
    assert main(["table", "--traces", "data/traces/thesis_cnn-train-b8.json.gz",
                 "--symbols", str(bad), "--table", str(t), "--metrics", str(mt)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: no parameter" in err and err.count("\n") == 1


def test_solver_agreement_rows(tmp_path):
    cfg = {"workers": 4, "bandwidth_gbps": 1, "latency_us": 50, "cost": "ring",
           "slot_ms": 5, "compute_scale": 1.0, "lp14_random": {"instances": 6, "seed": 1},
           "theorems": {"instances": 20, "seed": 1}}
    df, m = solver_rows(["data/traces/thesis_cnn-train-b8.json.gz"], cfg)
    assert m["pace.solvers.instances"] == 2 + 6
    assert m["pace.solvers.sound_equals_exact"] == m["pace.solvers.instances"]
    assert m["pace.solvers.lp14_equals_exact"] == m["pace.solvers.lp14_solved"]
    assert m["pace.solvers.lp14_solved"] >= 1
    assert m["pace.solvers.lp14_not_exact"] == 0
    # the lexicographic LP solves every instance, the traced ones included, exactly
    assert m["pace.solvers.lex_solved"] == m["pace.solvers.lex_equals_exact"] == 8
    assert m["pace.solvers.lex_not_exact"] == 0 and m["pace.solvers.lex_traced_share"] == 1.0
    assert m["pace.solvers.lex_traced_max_lp_solves"] >= 1
    # Theorems 1 and 3, Lemma 2: checked on every case, none broken
    assert m["pace.theorems.theorem1_cases"] == 5
    assert m["pace.theorems.lemma2_groupings"] > 20 and m["pace.theorems.theorem3_cases"] >= 20
    assert m["pace.theorems.theorem1_mismatches"] == m["pace.theorems.lemma2_violations"] \
        == m["pace.theorems.theorem3_violations"] == 0
    statuses = df["lp14_status"]
    assert (statuses.eq("solved") | statuses.str.startswith("refused: coefficient")).all()


def test_main_writes_tables_and_reports_bad_config(tmp_path, capsys):
    t, mt = tmp_path / "t.csv", tmp_path / "m.csv"
    assert main(["table", "--traces", "data/traces/thesis_cnn-train-b8.json.gz",
                 "--table", str(t), "--metrics", str(mt)]) == 0
    assert "pace.table2.thesis_cnn.allreduce_ops" in read_metrics([mt])
    capsys.readouterr()
    good = {"traces": ["thesis_cnn-train-b8"], "workers": 4, "bandwidth_gbps": 1,
            "latency_us": 50, "cost": "ring", "slot_ms": 5, "compute_scale": 1.0,
            "lp14_random": {"instances": 1, "seed": 0}, "theorems": {"instances": 1, "seed": 0}}
    # the driver checks the section against the config schema (commsched.driver)
    for cfg, message in [("{}", "config pace: 'traces' is a required property"),
                         ("[1]", "is not of type 'object'"),
                         ("{not json", "Expecting property name"),
                         (json.dumps({**good, "workers": "8"}),
                          "pace.workers: '8' is not of type 'integer'"),
                         (json.dumps({**good, "bandwidth_gbps": "10"}), "not of type 'number'"),
                         (json.dumps({**good, "bandwidth_gbps": 0}), "pace.bandwidth_gbps: 0"),
                         (json.dumps({**good, "lp14_random": {"seed": 0}}), "lp14_random"),
                         (json.dumps({**good, "cost": "tree"}), "'tree' is not one of")]:
        assert main(["solvers", "--config-json", cfg, "--traces",
                     "data/traces/thesis_cnn-train-b8.json.gz", "--table", str(t),
                     "--metrics", str(mt)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (cfg, err)
    assert main(["solvers", "--config-json", json.dumps(good), "--traces",
                 "data/traces/thesis_cnn-train-b8.json.gz", "--table", str(t),
                 "--metrics", str(mt)]) == 0
