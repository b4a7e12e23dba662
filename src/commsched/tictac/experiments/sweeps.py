"""TicTac Sec. 6 in simulation: both published protocols, on traced models.

TicTac (Hashemi, Jyothi & Campbell; SysML 2019 = ``tictac``, arXiv:1803.03288v1 =
``tictac-arxiv2018``) measures, on a TensorFlow cluster with parameter servers (PS), how
much enforcing the TIC or TAC order of parameter transfers speeds up synchronous
iterations over TensorFlow's arbitrary order. We repeat both versions' studies with the
multi-worker simulator (:mod:`commsched.tictac.sim`) on traced models
(``<trace-dir>/<name>.json.gz``, by default the committed ``data/traces``, converted by
:func:`commsched.views.ps_view`; the config names traces, ``--trace-dir`` says where):

============  ========================================================  ===============
figure        what varies (everything else from the ``tictac:`` config)  paper
============  ========================================================  ===============
``workers``   workers 2..16 at PS:worker 1:4                             SysML Fig. 7
``servers``   servers 1..4 with 8 workers                                SysML Fig. 9
``batch``     batch factor 0.5 / 1 / 2 (compute scaled), 4 workers        SysML Fig. 10
``ratio``     busiest server's comm/compute ratio 0.25..4, 4 workers      SysML Sec. 6.1
``models``    one setting per model: E, straggler, TIC vs TAC, control   SysML Figs. 11, 13
``arxiv``     1 PS, 1 and 4 workers, 1 Gbit/s, batch with S > 0.9        arXiv Figs. 9, 10
``steptime``  Inception v2, 1000 iterations, infer and train              SysML Fig. 12,
                                                                          arXiv Figs. 7, 8
============  ========================================================  ===============

Setting (our choices where the paper's cluster is not available to us):

* Link bandwidth, per model (all figures but ``ratio`` and ``arxiv``): TicTac picks
  settings where communication and computation are comparable. We set the bandwidth so
  that, at ``workers_per_server`` workers per server (the Fig. 7 ratio, 4), a server's link
  carries ``comm_to_compute`` times one worker's compute time of parameter bytes per
  iteration: ``bandwidth = workers_per_server * B / (comm_to_compute * C)`` with ``B`` the
  bytes of all recvs and ``C`` the summed compute time of the worker graph (batch factor
  1). Every transfer also pays ``latency_s``; the same link carries the gradient sends (on
  their own uplink channel when ``duplex``). Every row reports ``comm_ratio``, the
  *effective* ratio of the setting: the busiest server channel's load per iteration (all
  workers' transfers) over one worker's compute time. With ``sharding: greedy``
  (TensorFlow's ``GreedyLoadBalancingStrategy`` by bytes) or ``size`` (largest first;
  :func:`commsched.views.ps.shard_parameters`) it stays near ``comm_to_compute *
  n_workers / (workers_per_server * n_servers)`` unless one tensor dominates (VGG's fc6);
  round robin piles most bytes on one server.
* ``ratio`` (Sec. 6.1's threshold): 4 workers, 1 server, the link set per ratio ``r`` so
  that ``comm_ratio = r`` (latency aside).
* Batch factor (Fig. 10): every compute duration is multiplied by the factor (compute time
  grows about linearly with the batch); transfers are unchanged.
* Orders: ``baseline`` = an independent random recv order per worker and iteration
  (TensorFlow's arbitrary order, SysML Secs. 1 and 2.2); ``tic`` / ``tac`` = the order of
  :func:`commsched.tictac.tic` / :func:`commsched.tictac.tac` computed on the worker graph
  (with the scaled compute times for TAC), the same for every worker; in ``models`` also
  ``fixed_random``, the control of Sec. 6.3: one random order drawn once (seeded) and
  shared by all workers and iterations. ``order_time_s`` is the wall time of computing
  the order (Sec. 6: "about 10 seconds").
* Noise (:mod:`commsched.tictac.sim`): per-op jitter ``U[1 - jitter, 1 + jitter]``
  and a per-worker per-iteration compute factor whose coefficient of variation is
  ``worker_noise``. The default configuration takes that number from the live runs
  (:mod:`commsched.tictac.experiments.live`): the median over the live workloads of
  ``work_cv``, the spread of one worker's work time across steps and workers of the
  baseline configuration. It is a recorded number in ``config/config.yaml``, not read
  from ``results/``, so that the simulation does not depend on the live run (which needs
  root). ``worker_noise: trace`` takes it per model from the trace instead, as the
  coefficient of variation of the traced step wall times (``meta.step_wall_s``, the
  iteration-to-iteration spread of one TensorFlow process running the model; 1.5-24% for
  the committed traces).
* Simulated graph: with ``coarsen`` the simulator runs the coarsened view
  (:func:`commsched.tictac.sim.coarsen`; its effect on the gains is recorded by
  ``benchmarks/bench_multiworker.py``); TIC and TAC always see the full view.

Statistics. Every setting and order runs ``iterations`` synchronous iterations. SysML
protocol (Sec. 6, Setup): the first ``warmup`` (2) are discarded (they matter on a real
cluster; iterations of the simulator are independent, so this only fixes which draws
count) and the next ``recorded`` (10) give ``iter_mean_s`` (throughput: their mean),
``straggler_max`` and ``efficiency_max`` (their maximum). Beside them, the long run (all
iterations after the warm-up) gives ``*_long`` columns, which the CDFs, the arXiv protocol
and the shape claims use (10 iterations are too few for them). Per iteration:

* straggler effect = the longest wait of any worker at the barrier / the iteration time
  (Sec. 6.3);
* scheduling efficiency E (Eq. 3) from the iteration's own timeline of each worker
  (:func:`commsched.tictac.sim.timeline_efficiency`); the iteration's E is the
  smallest over its workers (the worst-ordered worker sets the step);
* theoretical best / worst (arXiv Sec. 6: E = 1 / E = 0 on every worker): the slowest
  worker's Eq. (2) / Eq. (1) bound with that iteration's op times
  (:class:`commsched.tictac.sim.RunResult`); the ``arxiv`` table carries them as
  orders ``best`` and ``worst``.

Gains and ratios against the baseline of the same setting: ``gain_pct`` = baseline
``iter_mean_s`` / the order's - 1 (in %), ``gain_long_pct`` the same with long-run means;
``straggler_reduction`` = baseline ``straggler_max`` / the order's (SysML statistic),
``straggler_reduction_long`` = the ratio of long-run means (the arXiv row uses it).

arXiv protocol (``arxiv``): 1 PS, ``n_workers`` 1 and 4, a ``link_Bps`` link (1 Gbit/s),
and per model the integer batch whose speedup bound S(G, Time) (Eq. 4) is largest, which
must exceed ``min_speedup`` (0.9): S is taken on one worker's graph whose transfer times
are its share of the server link when all workers pull at once (``n_workers`` x the
transfer time), so ``S = (U - L) / L`` with ``U`` compute plus channels and ``L`` the
largest of them.

Normalized step time (Fig. 12): the shortest iteration time of the mode's experiment (all
orders) divided by the iteration's time, so 1 is the fastest step and values fall towards
0 as steps get slower (the paper does not define it; this one is in [0, 1] with TAC near
1, the scale of its reported 95th percentiles).

Modules: the config section and the orders (:mod:`~commsched.tictac.experiments.
sweep_config`), the traced models and their links (:mod:`~commsched.tictac.experiments.
sweep_setting`), the runs (:mod:`~commsched.tictac.experiments.sweep_runs`) and the headline
numbers (:mod:`~commsched.tictac.experiments.sweep_metrics`); this one is the driver.

Run as ``python -m commsched.tictac.experiments.sweeps FIGURE --config config/config.yaml
--table results/tables/tictac_FIGURE.csv`` and, for the headline numbers,
``python -m commsched.tictac.experiments.sweeps metrics --tables ... --metrics M.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from commsched import driver
from commsched.results import write_table
from commsched.tictac.experiments.sweep_config import FIGURES, Params
from commsched.tictac.experiments.sweep_metrics import headline_metrics
from commsched.tictac.experiments.sweep_runs import run_figure, run_steptime
from commsched.tictac.experiments.sweep_setting import load_models

__all__ = ["FIGURE_KINDS", "FigureConfig", "main"]

#: Figures the notebooks draw from the tables (``kind`` of :class:`FigureConfig`).
FIGURE_KINDS = ("workers", "servers", "batch", "ratio", "efficiency", "tic_vs_tac", "arxiv",
                "steptime")


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of the ``notebooks/tictac_*.ipynb`` notebooks, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Attributes
    ----------
    table : str
        The figure's table (:func:`~commsched.tictac.experiments.sweep_runs.run_figure` or
        :func:`~commsched.tictac.experiments.sweep_runs.run_steptime`).
    kind : str, optional
        One of :data:`FIGURE_KINDS` (default ``steptime``).
    metrics : str, optional
        The metrics table (Fig. 12 prints R^2 and percentiles from it); empty for none.
    """

    table: str
    kind: str = "steptime"
    metrics: str = ""
    WHAT = "tictac"
    HINT = "run its snakemake rule first"
    KINDS = FIGURE_KINDS


def main(argv: Sequence[str] | None = None) -> int:
    """Run one figure's sweep, or summarize the tables into the headline metrics.

    Parameters
    ----------
    argv : sequence of str, optional
        The figure (or ``metrics``) and its options (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr (bad config, trace or table).
    """
    p = driver.parser(__name__, __doc__)
    driver.add_step_options(p, "figure", FIGURES, "tictac", "the config's traces")
    args = p.parse_args(argv)

    def body() -> None:
        if driver.metrics_step(args, "figure", FIGURES, headline_metrics):
            return
        params = Params.from_mapping(driver.section_from_options(args, "tictac"))
        config = {**params.raw, "figure": args.figure}
        if args.figure == "steptime":
            paths = args.traces or [driver.trace_file(args.trace_dir, t)
                                    for t in params.steptime_traces]
            df = run_steptime(load_models(paths, params), params)
        else:
            paths = args.traces or [driver.trace_file(args.trace_dir, t) for t in params.traces]
            df = run_figure(args.figure, load_models(paths, params), params, progress=driver.say)
        write_table(df, args.table, config)
        return None

    return driver.run(f"tictac {args.figure}", body)


if __name__ == "__main__":
    sys.exit(main())
