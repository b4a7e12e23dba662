"""All-reduce measurement (real TensorFlow processes) and the fit driver (PACE Fig. 3)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from commsched.cost.allreduce import fit_table, summarize
from commsched.errors import CommschedError
from commsched.pace.experiments import allreduce_bench, allreduce_fit
from commsched.results import read_table, write_table


def _children() -> set[int]:
    """PIDs of this process's live children (from /proc)."""
    me, out = os.getpid(), set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                out.add(int(d.name))
    return out


def _our_namespaces() -> list[str]:
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=10).stdout
    except OSError:
        return []
    return [line for line in out.splitlines() if line.startswith(f"csar-{os.getpid()}-")]


def test_log_sizes():
    assert allreduce_bench.log_sizes(4096, 64 << 20, 15)[:3] == [4096, 8192, 16384]
    sizes = allreduce_bench.log_sizes(4096, 64 << 20, 15)
    assert len(sizes) == 15 and sizes[-1] == 64 << 20
    assert all(s % 4 == 0 for s in sizes)
    with pytest.raises(CommschedError):
        allreduce_bench.log_sizes(4096, 1024, 3)


@pytest.mark.slow
def test_tiny_measurement_is_positive_and_grows():
    # 2 processes, 4 KiB and 4 MiB, 3 repetitions: about 10 s on 2 cores.
    before = _children()
    df, setup = allreduce_bench.measure([2], [4096, 4 << 20], reps=3, timeout_s=60)
    assert set(df.columns) == {"workers", "rank", "size_bytes", "rep", "seconds"}
    assert len(df) == 2 * 2 * 3 and (df["seconds"] > 0).all()
    summary = summarize(df)
    med = dict(zip(summary["size_bytes"], summary["median_s"], strict=True))
    assert med[4 << 20] > med[4096]  # 1000x the bytes takes longer
    assert setup["tf_version"]
    assert _children() <= before and not _our_namespaces()


@pytest.mark.slow
def test_measurement_timeout_kills_its_workers():
    before = _children()
    with pytest.raises(CommschedError, match="did not finish in time"):
        allreduce_bench.measure([2], [4096], reps=1, timeout_s=1.0)
    assert _children() <= before and not _our_namespaces()


def _synthetic(a: float, b: float, workers: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for size in allreduce_bench.log_sizes(4096, 64 << 20, 15):
        for rep in range(5):
            for rank in range(workers):
                t = (a + b * size) * (1 + 0.02 * rng.random())
                rows.append({"workers": workers, "rank": rank, "size_bytes": size, "rep": rep,
                             "seconds": t})
    return pd.DataFrame(rows)


def test_summary_takes_max_over_ranks_then_median():
    df = pd.DataFrame({
        "workers": 2, "size_bytes": 8,
        "rank": [0, 1, 0, 1, 0, 1], "rep": [0, 0, 1, 1, 2, 2],
        "seconds": [1.0, 3.0, 5.0, 2.0, 4.0, 4.5],
    })
    s = summarize(df)
    # per rep max: 3.0, 5.0, 4.5 -> median 4.5, min 3, max 5
    assert s.loc[0, "median_s"] == 4.5
    assert (s.loc[0, "min_s"], s.loc[0, "max_s"], s.loc[0, "reps"]) == (3.0, 5.0, 3)


def test_fit_driver_recovers_synthetic_lines(tmp_path):
    df = pd.concat([_synthetic(3e-3, 4e-9, 2, 0), _synthetic(8e-3, 6e-9, 4, 1)])
    write_table(df, tmp_path / "m.csv", {"synthetic": True})
    out = {k: str(tmp_path / f"{k}.csv") for k in ("summary", "fit", "metrics")}
    assert allreduce_fit.main(["--measurement", str(tmp_path / "m.csv"),
                               *[a for k, v in out.items() for a in (f"--{k}", v)]]) == 0
    fits = read_table(out["fit"]).set_index("workers")
    # noise is at most +2% (then max over ranks): slopes within 3%
    assert fits.loc[2, "b_s_per_byte"] == pytest.approx(4e-9, rel=0.03)
    assert fits.loc[4, "b_s_per_byte"] == pytest.approx(6e-9, rel=0.03)
    assert fits.loc[2, "a_s"] == pytest.approx(3e-3, rel=0.03)
    m = read_table(out["metrics"]).set_index("metric")["value"]
    assert m["comm.allreduce.w2.b_s_per_byte"] == pytest.approx(4e-9, rel=0.03)
    assert m["comm.allreduce.b_ratio_w4_w2"] == pytest.approx(1.5, rel=0.05)
    assert m["comm.allreduce.ring_b_ratio_w4_w2"] == 1.5
    # bus bandwidth of a 2-ring: 2(n-1)/n / b = 1 / b
    assert m["comm.allreduce.w2.busbw_Bps"] == pytest.approx(1 / fits.loc[2, "b_s_per_byte"])


def test_fit_driver_rejects_bad_tables(tmp_path, capsys):
    write_table(pd.DataFrame({"workers": [2], "seconds": [1.0]}), tmp_path / "m.csv")
    rc = allreduce_fit.main(["--measurement", str(tmp_path / "m.csv"), "--summary", "s",
                             "--fit", "f", "--metrics", "m"])
    assert rc == 2 and "lacks columns" in capsys.readouterr().err


def test_committed_measurement_fits_a_line():
    """The committed measurement (data/measurements) is well described by a + b*s."""
    path = Path(__file__).parent.parent / "data" / "measurements" / "allreduce_loopback.csv"
    fits = fit_table(summarize(read_table(path)))
    assert (fits["a_s"] > 0).all() and (fits["b_s_per_byte"] > 0).all()
    assert (fits["r2"] > 0.9).all()
