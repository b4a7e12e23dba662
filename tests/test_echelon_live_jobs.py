"""EchelonFlow live jobs (commsched.echelon.live): every paradigm's gradients equal
single-process training on the same seed, over the tagged transport (ranks as threads on
loopback) and in real processes (gloo point-to-point, direct and torchrun launches); the
flows they record match the simulator's job graph; bad job configs are one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from commsched.echelon.jobs import build_job
from commsched.echelon.live.jobs import (
    LIVE_PARADIGMS,
    LiveJob,
    RankResult,
    flow_meta,
    free_ports,
    profile_compute,
    reference,
    run_on_loopback,
)
from commsched.echelon.live.launch import launch
from commsched.echelon.live.worker import WorkerConfig
from commsched.errors import CommschedError


def small(paradigm: str, **kw: Any) -> LiveJob:
    base: dict[str, Any] = {"world": 3, "width": 16, "blocks": 4, "batch": 12,
                            "micro_batches": 3, "iterations": 2}
    return LiveJob("j", paradigm, **{**base, **kw})


def assembled(job: LiveJob, params: list[dict[int, torch.Tensor]]) -> list[torch.Tensor]:
    if job.paradigm == "fsdp":
        return [torch.cat([p[b] for p in params])[: job.block_params]
                for b in range(job.blocks)]
    out: dict[int, torch.Tensor] = {}
    for p in params:
        out.update(p)
    return [out[b] for b in range(job.blocks)]


def run_threads(job: LiveJob) -> list[RankResult]:
    return run_on_loopback(job, timeout=20)


@pytest.mark.parametrize("paradigm", LIVE_PARADIGMS)
def test_live_job_equals_single_process_training(paradigm: str) -> None:
    job = small(paradigm)
    res = run_threads(job)
    got = assembled(job, [r.params for r in res])
    for a, b in zip(got, reference(job), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the same flows as the simulator's job graph, with its sizes
    g = build_job(job.spec(), profile_compute(job, 1))
    flows = [f for r in res for f in r.flows]
    assert len(flows) == len(g.flow_src)
    want = sorted(round(x) for x in g.flow_size)
    assert sorted(f["bytes"] for f in flows) == pytest.approx(want, abs=4 * job.world)
    assert all(f["finish"] >= f["start"] for f in flows)


def test_uneven_stages_and_five_blocks() -> None:
    job = small("1f1b", blocks=5, micro_batches=4, batch=8)
    res = run_threads(job)
    for a, b in zip(assembled(job, [r.params for r in res]), reference(job), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_flow_meta_gives_gpipe_offsets() -> None:
    job = small("gpipe")
    prof = profile_compute(job, 1)
    meta = flow_meta(job, prof)
    # Eq. 6: activation k of stage 0 is due k T after the head, T = stage 1's forward
    got = [meta[(0, "act0", 0, k)] for k in range(3)]
    assert [i for i, _ in got] == [0, 1, 2]
    assert [o for _, o in got] == pytest.approx([k * prof.fwd[1] for k in range(3)])


def test_bad_job_configs_are_one_line_errors() -> None:
    with pytest.raises(CommschedError, match="unknown paradigm 'moe'"):
        small("moe")
    with pytest.raises(CommschedError, match="3 stages but only 2 blocks"):
        small("gpipe", blocks=2)
    with pytest.raises(CommschedError, match="not a multiple of micro_batches"):
        small("1f1b", batch=10)
    with pytest.raises(CommschedError, match="unknown backend"):
        WorkerConfig(job={}, rank=0, peers=[], out="x", backend="nccl")


@pytest.mark.slow  # 3 + 3 processes importing torch: 30-50 s on 2 loaded cores
@pytest.mark.parametrize("launcher", ["direct", "torchrun"])
def test_processes_with_gloo_point_to_point(tmp_path: Path, launcher: str) -> None:
    jobs = {}
    ports = free_ports(2)
    for k, paradigm in enumerate(["1f1b", "fsdp"]):
        job = small(paradigm, iterations=1)
        jobs[f"j{k}"] = [WorkerConfig(
            job={**job.__dict__, "name": f"j{k}"}, rank=r, peers=[["127.0.0.1", 0]] * 3,
            out=str(tmp_path / f"j{k}-{r}.json"), backend="gloo", master="127.0.0.1",
            dump=str(tmp_path / f"j{k}-{r}.pt"), phases=["a", "b"], timeout=60,
            join_timeout=60) for r in range(3)]
    res = launch(jobs, tmp_path / "work", 240, launcher=launcher,
                 ports={"j0": ports[0], "j1": ports[1]})
    for k, paradigm in enumerate(["1f1b", "fsdp"]):
        job = small(paradigm, iterations=1)
        params = [torch.load(tmp_path / f"j{k}-{r}.pt") for r in range(3)]
        for a, b in zip(assembled(job, params), reference(job), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert [p["policy"] for p in res[f"j{k}"][0]["phases"]] == ["a", "b"]
