"""One live run: the cluster, the controller and every job, each policy in turn.

:func:`run_live` brings up the two-rack cluster (:mod:`commsched.echelon.live.topology`),
measures the core's TCP rate, and then, ``repeats`` times, starts the controller
(:mod:`commsched.echelon.live.controller`) in its namespace and every job process
(:mod:`commsched.echelon.live.worker`, through ``torchrun`` or directly) in its host's
namespace, runs all policies as phases (the order rotated each repeat, so that a change
of the machine's load hits every policy alike), and collects the workers' and the
controller's records. Everything is torn down on every exit path.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.procs import ProcRecord, end_processes, self_owner, start_time
from commsched.echelon.live.controller import ControllerConfig
from commsched.echelon.live.jobs import LiveJob
from commsched.echelon.live.launch import launch
from commsched.echelon.live.topology import Topology, live_cluster
from commsched.echelon.live.worker import WorkerConfig
from commsched.errors import CommschedError

__all__ = ["DATA_PORT", "JobPlacement", "run_live"]

#: Ports inside the namespaces: job data, rendezvous, controller store and UDP.
DATA_PORT, RDZV_PORT, STORE_PORT, UDP_PORT = 7000, 29500, 29400, 29300
#: DSCP tags per process (9 processes x 7 tags = 63, every DSCP value but 0).
TAGS_PER_PROCESS = 7


@dataclass(frozen=True)
class JobPlacement:
    """A job and the racks of its processes (rank order)."""

    job: LiveJob
    racks: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.racks) != self.job.world:
            raise CommschedError(f"job {self.job.name}: {len(self.racks)} racks for "
                                 f"{self.job.world} processes")


def _hosts(jobs: Sequence[JobPlacement]) -> list[list[int]]:
    out, h = [], 0
    for jp in jobs:
        out.append(list(range(h, h + jp.job.world)))
        h += jp.job.world
    return out


def run_live(jobs: Sequence[JobPlacement], policies: Sequence[str], repeats: int,
             topo_rates: tuple[str, str], workdir: str | Path,
             profiles: Mapping[str, Mapping[str, list[float]]], launcher: str = "torchrun",
             backend: str = "tagged", timeout: float = 900.0, phase_timeout: float = 120.0
             ) -> dict[str, Any]:
    """Run every policy ``repeats`` times (module docstring); needs root.

    Parameters
    ----------
    jobs : sequence of JobPlacement
        The jobs, at most 9 processes in all (7 DSCP tags each); the racks used must
        include 0 and 1.
    policies : sequence of str
        Names in :data:`commsched.echelon.live.controller.POLICIES`, each one phase;
        repeat ``k`` starts at policy ``k mod len(policies)``, after a warm-up ``none``.
    repeats : int
        >= 1.
    topo_rates : tuple of (str, str)
        Host and core link rates, tc syntax (``"400mbit"``).
    workdir : str or Path
        Gets ``repeat<k>/`` (configs, logs, results) and ``run.json``.
    profiles : mapping
        ``profiles[job]``: the compute profile (``fwd``, ``bwd``: seconds per block)
        that sets the job's EchelonFlow offsets.
    launcher : {"torchrun", "direct"}, optional
        As in :func:`commsched.echelon.live.launch.worker_argv`.
    backend : str, optional
        The workers' transport, one of :data:`commsched.echelon.live.worker.BACKENDS`.
    timeout : float, optional
        Seconds for the cluster's setup steps and for each repeat's processes.
    phase_timeout : float, optional
        Seconds a phase's waits may take (controller and workers).

    Returns
    -------
    dict
        ``{"core_Bps_measured", "topology", "runs": [{"repeat", "phases", "workers":
        {job: [rank results]}, "controller": log}]}``, also written to
        ``workdir/run.json``.

    Raises
    ------
    CommschedError
        More than 9 processes, a failed cluster setup or core measurement, or a failed
        or late process (:func:`commsched.echelon.live.launch.launch`).
    """
    hosts = _hosts(jobs)
    racks = tuple(r for jp in jobs for r in jp.racks)
    if sum(jp.job.world for jp in jobs) * TAGS_PER_PROCESS > 63:
        raise CommschedError(f"at most {63 // TAGS_PER_PROCESS} job processes (DSCP tags)")
    topo = Topology(racks, host_rate=topo_rates[0], core_rate=topo_rates[1])
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"topology": asdict(topo), "runs": []}
    with live_cluster(topo, timeout) as cl:
        a = next(i for i, r in enumerate(racks) if r == 0)
        b = next(i for i, r in enumerate(racks) if r == 1)
        _, rate = net.tcp_rate(cl.namespace(a), cl.namespace(b), cl.address(b),
                               int(min(4e6, topo.core_Bps * 2)), timeout=60.0)
        out["core_Bps_measured"] = rate
        ctl_addr = cl.address("ctl")
        for rep in range(repeats):
            k = rep % len(policies)
            # a warm-up phase first (connections, caches), left out of the analysis
            phases = ["none", *policies[k:], *policies[:k]]
            rdir = work / f"repeat{rep}"
            rdir.mkdir(parents=True, exist_ok=True)
            ccfg = ControllerConfig(
                racks=list(racks), host_Bps=topo.host_Bps, core_Bps=topo.core_Bps,
                bridges=list(cl.bridges), phases=phases, n_workers=len(racks),
                udp_port=UDP_PORT, store_port=STORE_PORT, out=str(rdir / "controller.json"),
                timeout=phase_timeout, owner=self_owner())
            cpath = rdir / "controller-config.json"
            atomic_write_text(cpath, json.dumps(asdict(ccfg)) + "\n")
            ctl = cl.spawn("ctl", "controller", [sys.executable, "-m",
                                                 "commsched.echelon.live.controller",
                                                 str(cpath)], rdir / "controller.log")
            cfgs: dict[str, list[WorkerConfig]] = {}
            where: dict[str, int] = {}
            for jp, hs in zip(jobs, hosts, strict=True):
                peers = [[cl.address(h), DATA_PORT] for h in hs]
                cfgs[jp.job.name] = [WorkerConfig(
                    job=asdict(jp.job), rank=r, peers=peers, hosts=hs,
                    out=str(rdir / f"{jp.job.name}-r{r}.result.json"), backend=backend,
                    master=cl.address(hs[0]), port=RDZV_PORT,
                    tag_base=1 + TAGS_PER_PROCESS * h, tags=TAGS_PER_PROCESS,
                    controller=[ctl_addr, UDP_PORT], store=[ctl_addr, STORE_PORT],
                    phases=phases, profile=dict(profiles[jp.job.name]),
                    timeout=phase_timeout, join_timeout=120.0) for r, h in enumerate(hs)]
                for r, h in enumerate(hs):
                    where[f"{jp.job.name}-r{r}"] = h

            def spawn(role: str, argv: list[str], log: Path, env: Mapping[str, str],
                      where: dict[str, int] = where) -> Any:
                return cl.spawn(where[role], role, argv, log, {**env,
                                                               "GLOO_SOCKET_IFNAME": "eth0"})

            try:
                res = launch(cfgs, rdir, timeout, launcher=launcher, spawn_process=spawn,
                             ports={n: RDZV_PORT for n in cfgs},
                             extra=[("the controller", ctl)])
            finally:
                end_processes([ProcRecord(ctl.pid, start_time(ctl.pid) or 0, "controller",
                                          None, "")], popens={ctl.pid: ctl})
            log = json.loads((rdir / "controller.json").read_text())
            out["runs"].append({"repeat": rep, "phases": phases, "workers": res,
                                "controller": log})
    atomic_write_text(work / "run.json", json.dumps(out) + "\n")
    return out

