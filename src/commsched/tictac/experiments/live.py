"""Live experiment: TIC and TAC enforced in a real TensorFlow parameter-server cluster.

TicTac (Hashemi, Jyothi & Campbell, SysML 2019) measured its gains on a real cluster with
the order enforced inside TensorFlow's runtime (Sec. 5-6). This driver does the same on an
emulated cluster (:mod:`commsched.cluster`: P servers and N workers in network namespaces,
every link shaped to the configured bandwidth) or on a real one (``live.hosts``), and puts
the simulator's prediction beside every measurement.

For every configured model and mode (inference, training):

1. **Orders.** The model's trace at the live batch and thread settings (written by
   ``commsched trace``, rule ``live_trace``; matched by its ``meta``) becomes a
   parameter-server view (:func:`commsched.views.ps_view`, P servers, links of the
   model's bandwidth);
   :func:`commsched.tictac.tic` and :func:`commsched.tictac.tac` rank its recvs, and each
   recv's priority becomes its variable's
   (:func:`commsched.tictac.live.order.variable_priorities`).
2. **Configs.** ``baseline`` (hook ``none``: TensorFlow's own order) and one config per
   order and hook (``tic-sender``, ``tac-dag``, ...), all measured in the same worker
   processes with interleaved steps (:mod:`commsched.tictac.live.job`).
3. **Prediction.** The multi-worker simulator (:mod:`commsched.tictac.sim`) runs the
   same view with N workers sharing each server's channel. On the view as traced
   (``predicted_nominal_s``: nominal link rate, the oracle's op times, the intended
   orders: the baseline as independent random orders per worker and iteration,
   ``sim_iterations`` of them, mean; TIC and TAC with their order). Then with the
   runtime overheads the oracle leaves out (:mod:`commsched.cost.overhead`: per-transfer
   cost and measured link rate, the DAG hook's gates on the worker's executor, the
   executor's gaps, the barrier's round trip, fitted by
   :func:`~commsched.tictac.live.analysis.fit_overhead` from the run's *traced*
   steps pooled over all models and configs; the compute speed per model and mode from
   its own traced steps, :func:`~commsched.tictac.live.analysis.workload_compute_factors`):
   on the intended orders
   (``predicted_intended_s``) and on the orders the run *achieved* (``predicted_s``: one
   simulated iteration per traced step of the config, each worker's transfers ranked by
   their arrival in that step, :func:`~commsched.tictac.live.workload.achieved_ranks`), which
   separates the simulator's
   error from the hook's (the hooks enforce the order only in part: ``end_agreement``).
   ``pred_error_loo``: the achieved orders with every overhead, compute speed included,
   fitted on the other models only (a check that the fit generalises). One fit for the
   runtime, nothing per model (:func:`~commsched.tictac.live.analysis.runtime_predictions`:
   the pooled compute speed, slowed while a transfer is in flight, the sender hook's
   fallback to an arbitrary order and the workers' spread too), on the intended orders:
   over every model
   (``pred_error_runtime``) and over the other models only (``pred_error_lomo``, what a
   user predicting a model that has not run gets). Each intended-order prediction gives
   every config its hook's overheads. ``pred_error = predicted / measured - 1`` on the
   mean iteration time.
4. **TensorFlow's own order and gRPC.** From the traced steps: how often the baseline's
   order of arrival repeats (:func:`~commsched.tictac.live.tables.arrival_order_repeats`;
   TicTac Sec. 1 and 2.2 saw a new
   order in every iteration) and how many transfers arrived after one of lower priority
   (:func:`~commsched.tictac.live.tables.out_of_order_rate`). From the sender configs'
   captured steps (``live.grpc_capture_iterations``; the PS's link captured in its
   namespace, :mod:`commsched.cluster.capture`): the order in which the PS's gRPC wrote
   the responses against the order they were handed to it
   (:mod:`commsched.tictac.live.grpcorder`, table ``--grpc-order``; Sec. 5.1: 0.4-0.5%
   under enforcement).

Measured per step and worker: the work and barrier times; the *iteration time* of a step is
the largest ``work + barrier`` over the workers, the *straggler effect* the longest barrier
wait over the iteration time (TicTac Sec. 6.3, as :mod:`commsched.tictac.sim` reads
it). Throughput = N x batch / mean iteration time; gain = baseline mean iteration time /
config mean iteration time - 1. From the traced steps: every parameter transfer's start
(the sender's send start) and end, and the *order agreement*: the fraction of pairs of
transfers of different priority (TAC's, for the baseline) that started in priority order
(0.5 = unordered, 1 = perfectly ordered), and the *end agreement*, the same for the order
in which they arrived (transfers that start in order but share the link can still finish
out of order).

Without root or namespace support (and without ``live.hosts``) nothing runs: the tables
hold one row ``skipped: <reason>`` and the metrics table is empty, so the claims stay
*pending*. Run as ``python -m commsched.tictac.experiments.live --config-json '{...}' --traces
T.json ... --steps S.csv --transfers X.csv --traced T.csv --summary Y.csv --grpc-order
G.csv --metrics M.csv``; ``--reuse`` re-analyses the job results (and capture windows) an
earlier run left in ``--workdir``.

Modules (:mod:`commsched.tictac.live`): the config section (:mod:`~commsched.tictac.live.
config`), the workloads and their predictions (:mod:`~commsched.tictac.live.workload`),
the cluster and the job clients (:mod:`~commsched.tictac.live.runner`, running
:mod:`~commsched.tictac.live.job`), the tables (:mod:`~commsched.tictac.live.tables`) and
the summary, fits and metrics (:mod:`~commsched.tictac.live.analysis`); this one is the
driver.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from commsched import driver
from commsched.tictac.live.analysis import analyse
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.grpcorder import processing_order
from commsched.tictac.live.runner import cluster_run, load_captures, reuse_results, skipped_reason
from commsched.tictac.live.tables import tables, traced_steps
from commsched.tictac.live.workload import achieved_ranks, load_workloads

__all__ = ["FIGURE_KINDS", "FigureConfig", "main"]

#: The figures of ``notebooks/live.ipynb``.
FIGURE_KINDS = ("steptime_cdf", "gain", "prediction", "transfers")


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of ``notebooks/live.ipynb``, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Attributes
    ----------
    summary, steps, transfers : str
        The tables of rule ``live_run``.
    kind : str
        One of :data:`FIGURE_KINDS`.
    """

    summary: str
    steps: str
    transfers: str
    kind: str
    WHAT = "live"
    HINT = "run rule live_run first"
    KINDS = FIGURE_KINDS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the live experiment (or say why it is skipped) and write its tables.

    Parameters
    ----------
    argv : sequence of str, optional
        The config option, ``--traces``, ``--workdir``, the five tables to write and
        ``--reuse`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, also when the experiment is skipped; 2 after a one-line error on stderr.
    """
    p = driver.parser(__name__, __doc__)
    driver.add_config_options(p, "live")
    p.add_argument("--traces", nargs="*", default=[],
                   help="traced graphs of the live models (rule live_trace)")
    driver.add_workdir_options(p, "plans, client logs", "results/live/run")
    p.add_argument("--steps", required=True, help="per-step table (CSV)")
    p.add_argument("--transfers", required=True, help="per-transfer table (CSV)")
    p.add_argument("--traced", required=True, help="per-traced-step table (CSV)")
    p.add_argument("--summary", required=True, help="per-config summary table (CSV)")
    p.add_argument("--grpc-order", required=True,
                   help="per-transfer table of the captured steps: the order the PS sent")
    p.add_argument("--metrics", required=True, help="metrics table (CSV)")
    args = p.parse_args(argv)

    def body() -> None:
        params = LiveParams.from_config(driver.section_from_options(args, "live"))
        reason = skipped_reason(params)
        if reason:
            driver.write_skipped("live experiment", reason,
                                 [args.steps, args.transfers, args.traced, args.summary,
                                  args.grpc_order], args.metrics, params.raw)
            return
        t = time.perf_counter()
        loads = load_workloads(params, args.traces)
        for w in loads:
            driver.say(f"{w.group_id}: comm/comp {w.comm_comp:.2f}, predicted "
                + ", ".join(f"{k} {v:.3f}s" for k, v in w.predicted.items()))
        if args.reuse:
            results = reuse_results(Path(args.workdir), loads)
        else:
            results = cluster_run(params, loads, Path(args.workdir), driver.say)
        steps, xfers = tables(results, loads, params.workers)
        traced = traced_steps(results, loads)
        order = processing_order(results, load_captures(Path(args.workdir)), loads)
        summary, values = analyse(steps, xfers, traced, loads, params,
                                  achieved_ranks(results, loads, params.workers), driver.say,
                                  order)
        cfg = {**params.raw, "wall_s": round(time.perf_counter() - t, 1)}
        driver.write_outputs({args.steps: steps, args.transfers: xfers, args.traced: traced,
                              args.summary: summary, args.grpc_order: order}, values,
                             args.metrics, cfg)
        driver.say(summary.to_string(index=False))

    return driver.run("live", body)


if __name__ == "__main__":
    sys.exit(main())
