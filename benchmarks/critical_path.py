"""The critical path of a pipeline run, from Snakemake's own log.

``make reproduce`` is bounded below by its longest chain of dependent jobs, whatever the
number of cores. This script reads a Snakemake log (default: the newest under
``.snakemake/log/``), takes each job's start and finish times and its input and output
files, links a job to the jobs that made its inputs, and prints

* the run's wall time, the summed job time (what one core would need) and their ratio;
* the critical path: the chain of dependent jobs with the largest summed duration;
* the work bound: jobs that take every core (``threads: workflow.cores``: the live runs,
  so that nothing runs beside them and their timings stay clean) run one after another,
  and the other jobs' core-seconds share the cores; no schedule on that many cores is
  shorter than ``exclusive + other core-seconds / cores`` (nor than the critical path);
* the ten longest jobs.

With ``--record FILE`` the numbers are written as JSON (``benchmarks/results/``).

Run: ``python benchmarks/critical_path.py [LOG] [--record benchmarks/results/critical_path.json]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
_FINISH = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")


@dataclass
class Job:
    jobid: int
    rule: str
    start: float
    end: float | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    threads: int = 1

    @property
    def seconds(self) -> float:
        return (self.end or self.start) - self.start


def _time(s: str) -> float:
    return datetime.strptime(" ".join(s.split()), "%a %b %d %H:%M:%S %Y").timestamp()


def parse(log: Path) -> list[Job]:
    """Jobs of a Snakemake log that finished (target rules without a shell included)."""
    jobs: dict[int, Job] = {}
    now: float | None = None
    current: Job | None = None  # the job being described, until the next time stamp
    for line in log.read_text(errors="replace").splitlines():
        if m := _STAMP.match(line):
            now, current = _time(m.group(1)), None
            continue
        if (m := _START.match(line)) and now is not None:
            current = Job(-1, m.group(1), now)
            continue
        s = line.strip()
        if current is not None and s.startswith(("input: ", "output: ")):
            key, _, files = s.partition(": ")
            getattr(current, key + "s").extend(f.strip() for f in files.split(","))
        elif current is not None and s.startswith("threads: "):
            current.threads = int(s.split()[1])
        elif current is not None and s.startswith("jobid: "):
            current.jobid = int(s.split()[1])
            jobs[current.jobid] = current
        elif (m := _FINISH.match(line)) and now is not None and int(m.group(1)) in jobs:
            jobs[int(m.group(1))].end = now
    return [j for j in jobs.values() if j.end is not None]


def critical_path(jobs: list[Job]) -> tuple[float, list[Job]]:
    """The chain of dependent jobs with the largest summed duration."""
    maker = {out: j for j in jobs for out in j.outputs}
    best: dict[int, tuple[float, Job | None]] = {}
    for j in sorted(jobs, key=lambda j: (j.end, j.start)):
        deps = {maker[f].jobid: maker[f] for f in j.inputs if f in maker}
        prev = max(deps.values(), key=lambda d: best[d.jobid][0], default=None)
        base = best[prev.jobid][0] if prev is not None and prev.jobid in best else 0.0
        best[j.jobid] = (base + j.seconds, prev)
    if not best:
        return 0.0, []
    last = max(jobs, key=lambda j: best[j.jobid][0])
    total, chain = best[last.jobid][0], []
    cur: Job | None = last
    while cur is not None:
        chain.append(cur)
        cur = best[cur.jobid][1]
    return total, chain[::-1]


def work_bound(jobs: list[Job], cores: int) -> tuple[float, float]:
    """The exclusive jobs' summed time and the lower bound on the wall time it implies.

    A job with ``threads >= cores`` runs alone; every other job occupies ``threads``
    cores for its duration. Returns ``(exclusive_s, bound_s)`` with ``bound_s =
    exclusive_s + (the other jobs' core-seconds) / cores``.
    """
    exclusive = sum(j.seconds for j in jobs if j.threads >= cores)
    shared = sum(j.seconds * j.threads for j in jobs if j.threads < cores)
    return exclusive, exclusive + shared / cores


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log", nargs="?", help="Snakemake log (default: the newest)")
    p.add_argument("--record", help="write the numbers to this JSON file")
    p.add_argument("--cores", type=int, help="cores of the run (default: the most threads "
                   "any job took)")
    args = p.parse_args(argv)
    if args.log:
        log = Path(args.log)
    else:
        logs = sorted(Path(".snakemake/log").glob("*.snakemake.log"))
        if not logs:
            print("critical_path: error: no Snakemake log under .snakemake/log", file=sys.stderr)
            return 2
        log = logs[-1]
    jobs = parse(log)
    if not jobs:
        print(f"critical_path: error: {log}: no finished job", file=sys.stderr)
        return 2
    wall = max(j.end or 0.0 for j in jobs) - min(j.start for j in jobs)
    busy = sum(j.seconds for j in jobs)
    total, chain = critical_path(jobs)
    cores = args.cores or max(j.threads for j in jobs)
    exclusive, bound = work_bound(jobs, cores)
    print(f"{log}: {len(jobs)} jobs, wall {wall / 60:.1f} min, summed job time "
          f"{busy / 60:.1f} min ({busy / wall:.2f} jobs at a time on average)")
    print(f"work bound on {cores} cores: {max(bound, total) / 60:.1f} min ("
          f"{exclusive / 60:.1f} min of jobs that take every core, run one after another: "
          + ", ".join(f"{j.rule} {j.seconds:.0f} s" for j in jobs if j.threads >= cores)
          + ")")
    print(f"critical path: {total / 60:.1f} min over {len(chain)} jobs")
    for j in chain:
        print(f"  {j.seconds:8.0f} s  {j.rule}  {', '.join(j.outputs[:1])}")
    print("longest jobs:")
    for j in sorted(jobs, key=lambda j: -j.seconds)[:10]:
        print(f"  {j.seconds:8.0f} s  {j.rule}  {', '.join(j.outputs[:1])}")
    if args.record:
        Path(args.record).write_text(json.dumps({
            "log": log.name, "jobs": len(jobs), "wall_s": wall, "job_s": busy,
            "critical_path_s": total, "cores": cores, "exclusive_s": exclusive,
            "work_bound_s": max(bound, total),
            "exclusive": [{"rule": j.rule, "seconds": j.seconds} for j in jobs
                          if j.threads >= cores],
            "critical_path": [{"rule": j.rule, "seconds": j.seconds,
                               "output": j.outputs[:1]} for j in chain],
            "longest": [{"rule": j.rule, "seconds": j.seconds, "output": j.outputs[:1]}
                        for j in sorted(jobs, key=lambda j: -j.seconds)[:10]],
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
