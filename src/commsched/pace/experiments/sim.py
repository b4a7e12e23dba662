"""PACE Sec. VI in simulation: every all-reduce policy on traced models (Figs. 2, 8, 9, 10).

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) measures training speed on a GPU cluster with
W workers and ring all-reduce. We run the same comparison in the all-reduce simulator
(:mod:`commsched.pace.sim`) with every policy of the registry
(:data:`commsched.pace.policies.POLICIES`) on our traces of the paper's four models.

=============  ==========================================================  ==================
experiment     what varies (everything else from the ``pace_sim:`` config)  table
=============  ==========================================================  ==================
``fig2``       Sec. II-C / Fig. 2: FIFO vs reordering vs preemption on a     pace_sim_fig2
               three-all-reduce instance (:mod:`.fig2`)
``workers``    Fig. 8: workers, at ``workers.bandwidth_gbps``               pace_sim_workers
``bandwidth``  Fig. 9: link bandwidth, at ``bandwidth.n_workers``           pace_sim_bandwidth
``usage``      Fig. 10: outbound traffic of a worker in 5 ms bins           pace_sim_usage
``scale``      our sweep: compute time x factor (1 = the 1080 Ti), i.e.     pace_sim_scale
               the communication / computation ratio
=============  ==========================================================  ==================

Setting (the paper's testbed is 1080 Ti GPUs and 25 GbE, shaped by tc):

* **Compute times.** Our traces are CPU traces (batch 2-4). Each model's compute is
  rescaled so that one training step without communication (forward + backward pass in the
  simulator, :attr:`commsched.pace.sim.Workload.compute_time`) takes the model's step time
  on the paper's GTX 1080 Ti at the paper's batch, per model from public measurements
  (:mod:`commsched.pace.experiments.calibration`; table ``data/calibration/
  pace_gtx1080ti.csv``, sources in its README): VGG-16 512.0 ms, ResNet-50 153.1 ms,
  Transformer 212.6 ms, Seq2Seq 230.9 ms. The per-model scale is that time over the
  trace's; op times keep their traced proportions. The ``scale`` experiment multiplies every
  model's time by ``compute_factors`` (the paper: a V100 is 2-9x faster than a 1080 Ti).
* **All-reduce time.** Ring all-reduce, PACE Eq. (1) without the aggregation term plus a
  start-up: ``2(W-1) * latency_s + overhead_s + 2(W-1)/W * S / B``
  (:class:`commsched.cost.RingAllReduce` + ``overhead_s``). Without a start-up term
  fusing tensors could never pay off (Sec. II-C). The paper's 25 GbE testbed with NCCL:
  ``latency_s`` = 6.6 us per ring step (NCCL's cost model for a network ring) and
  ``overhead_s`` = 402 us, from the paper's Fig. 3 (all-reduce time stops falling linearly
  below about 1 MB; README of ``data/calibration``).
* **Compute resource.** ``compute_capacity`` ops at once: ``unbounded`` (default) is
  PACE's ideal compute (Sec. IV-A, constraint (5)), the model in which PACE's plans are
  optimal; 1 is one op at a time (one GPU stream).
* **PACE's slots.** 1 ms (config ``options.pace.slot_ms``; Sec. IV-A only asks for a
  slot no longer than the smallest fused all-reduce and names 5 ms as an example). The
  slotted schedule rounds each all-reduce up to whole slots and sizes partitions by slot
  shares, so the simulated plan drifts from the planned times; with 5 ms slots PACE's plan
  ran 888 ms per iteration against 827 ms with 1 ms slots on VGG-16 (12 workers, 10
  Gbit/s) when we chose.
* **Preemption is not free here.** Every partition is its own all-reduce and pays the
  start-up ``overhead_s + 2(W-1) * latency_s`` in full; PACE's model (Sec. IV-A) charges
  an all-reduce ``ceil(g_i)`` slots however many pieces preemption cuts it into. So the
  simulated time of PACE's plan can exceed its own prediction (plan meta
  ``predicted_iter_s``, kept in the tables' ``info`` column), and where that happens a
  non-preemptive policy can beat it.
* **Speed** = ``W * batch / iteration time`` (samples/s; Sec. VI-B: images or tokens per
  second, the paper's Fig. 8 shows the total). The iteration time is the simulator's steady
  state. ``gain_pct`` of policy A over B = ``speed_A / speed_B - 1`` in percent. The
  paper's "Horovod" is the 64 MiB / 5 ms default of its time (``horovod-0.20``).
* **Fig. 10.** Outbound traffic of one worker: a partition of ``b`` bytes sends
  ``2(W-1)/W * b`` bytes at a constant rate over its duration
  (:meth:`~commsched.pace.sim.PlanRun.channel_usage`), tiled over ``iterations``
  steady-state iterations. An idle *valley* is a maximal period without any all-reduce
  (across the iteration boundary too).

The sweeps are :mod:`commsched.pace.experiments.sim_sweeps`, the instance of Fig. 2
:mod:`commsched.pace.experiments.fig2`, the headline numbers
:mod:`commsched.pace.experiments.sim_metrics`. Run as ``python -m
commsched.pace.experiments.sim EXPERIMENT --config config/config.yaml --table T.csv`` (or
``--config-json`` with the ``pace_sim`` section) and ``... metrics --tables EXP=CSV ...
--metrics M.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from commsched import driver
from commsched.pace.experiments.fig2 import run_fig2
from commsched.pace.experiments.sim_metrics import headline_metrics
from commsched.pace.experiments.sim_sweeps import SWEEPS, Params, load_models, run_experiment
from commsched.results import write_table

__all__ = ["EXPERIMENTS", "FIGURE_KINDS", "FigureConfig", "main"]

EXPERIMENTS = ("fig2", *SWEEPS)


# --- notebooks and the command line ------------------------------------------------------

#: Figures the notebooks draw (``kind`` of :class:`FigureConfig`): one per sweep.
FIGURE_KINDS = SWEEPS


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of the ``notebooks/pace_*.ipynb`` notebooks, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Parameters
    ----------
    kind : str
        The experiment whose table is drawn, one of :data:`FIGURE_KINDS`.
    table : str
        That experiment's table.
    """

    kind: str = "workers"
    table: str = ""
    KINDS = FIGURE_KINDS
    WHAT = "pace_sim"
    HINT = "run its snakemake rule first"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one experiment, or summarize the tables as metrics (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``EXPERIMENT --config-json J ... --table T.csv`` or ``metrics ...``.

    Returns
    -------
    int
        0, or 2 after a one-line error (a config the schema rejects, a missing trace or
        option, an unreadable table).
    """
    p = driver.parser("commsched.pace.experiments.sim", __doc__)
    driver.add_step_options(p, "experiment", EXPERIMENTS, "pace_sim",
                            "the config's traces (named <trace>.json.gz)")
    args = p.parse_args(argv)

    def body() -> None:
        if driver.metrics_step(args, "experiment", EXPERIMENTS, headline_metrics):
            return
        if args.experiment == "fig2":
            write_table(run_fig2(), args.table, {"experiment": "fig2"})
            return
        params = Params.from_mapping(driver.section_from_options(args, "pace_sim"))
        models = load_models(params, args.trace_dir, args.traces)
        df = run_experiment(args.experiment, models, params, progress=driver.say)
        write_table(df, args.table, {**params.raw, "experiment": args.experiment})

    return driver.run(f"pace_sim {args.experiment}", body)


if __name__ == "__main__":
    sys.exit(main())
