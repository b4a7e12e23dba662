"""The workloads of the live TicTac experiment: views, orders, configs and predictions.

A *workload* is one configured model and mode of :mod:`commsched.tictac.experiments.live`
(steps 1-3 of its docstring): the parameter-server view of its trace, the orders of
:data:`commsched.tictac.ORDERINGS` on it, the configs the live job measures, and the
multi-worker simulator's predictions for each config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from commsched.cluster import net
from commsched.cost import LinkModel
from commsched.cost.overhead import Overhead
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.progress import progress
from commsched.tictac import ORDERINGS
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.order import match_variables, variable_priorities
from commsched.tictac.sim import (
    MultiWorker,
    compose,
    rank_priorities,
    worker_noise_factors,
)
from commsched.tictac.sim import iteration as simulate_iteration
from commsched.tictac.sim import run as simulate_workers
from commsched.views import ps_view

__all__ = [
    "Workload",
    "achieved_ranks",
    "live_names",
    "live_reference",
    "load_workloads",
    "oracle_compute",
]


@dataclass
class Workload:
    """One model and mode: its view, orders, configs for the job and predictions.

    Built by :func:`load_workloads`.

    Attributes
    ----------
    model, mode : str
        The zoo model and ``infer`` or ``train``.
    batch, size : int
        The per-worker batch and the input size.
    bandwidth : str
        The links' rate, in tc's units.
    view : networkx.DiGraph
        The parameter-server view of the trace (:func:`commsched.views.ps_view`).
    orders : dict
        ``{ordering: {variable: priority}}``, what the live job enforces.
    recv_orders : dict
        ``{ordering: {recv op of the view: priority}}``, what the simulator runs.
    configs : list of dict
        The configs of the job plan (:mod:`commsched.tictac.live.job`): the baseline
        (hook ``none``) and one per ``<ordering>-<hook>``.
    predicted : dict of str to float
        ``{config: mean iteration time (s)}`` on the view as traced (:meth:`predict`).
    comm_comp : float
        The workers' parameter bytes per iteration at the link rate over one worker's
        compute time (the oracle's).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 5-6.
    """

    model: str
    mode: str
    batch: int
    size: int
    bandwidth: str
    view: nx.DiGraph
    orders: dict[str, dict[str, float]]
    recv_orders: dict[str, dict[str, int]]
    configs: list[dict[str, Any]]
    predicted: dict[str, float]
    comm_comp: float

    @property
    def group_id(self) -> str:
        """The group's id in the job plan, ``<model>.<mode>`` (``_`` becomes ``-``)."""
        return f"{self.model.replace('_', '-')}.{self.mode}"

    def predict(self, n_workers: int, iterations: int, seed: int,
                overhead: Overhead | None = None) -> dict[str, float]:
        """The simulator's mean iteration time of every config with its intended order.

        The baseline runs an independent random order per worker and iteration; every
        ordered config runs its ordering's priorities (:func:`commsched.tictac.sim.run`),
        with its hook's overheads (:meth:`~commsched.cost.overhead.Overhead.for_hook`);
        under the sender hook with ``sender_fallback`` > 0, each worker's order falls
        back to a random one in that share of its iterations.

        Parameters
        ----------
        n_workers : int
            Workers sharing each server's channel.
        iterations : int
            Simulated iterations per order.
        seed : int
            The simulator's seed.
        overhead : Overhead, optional
            The runtime overheads (:mod:`commsched.cost.overhead`); None (default): the
            view as traced.

        Returns
        -------
        dict of str to float
            ``{config name: seconds}``.
        """
        by_run: dict[tuple[str, str], float] = {}
        for key in dict.fromkeys(self._view_key(c, overhead) for c in self.configs):
            hook, order = key
            view = (overhead.for_hook(self.view, hook, self.recv_orders.get(order))
                    if overhead else self.view)
            mw = compose(view, n_workers)
            if overhead and hook == "sender" and overhead.sender_fallback > 0:
                t = self._fallback_mean(mw, self.recv_orders[order], iterations, seed,
                                        overhead)
            else:
                res = simulate_workers(mw, self.recv_orders.get(order), iterations,
                                       seed=seed, validate_every=max(1, iterations // 10),
                                       contention=overhead.contention if overhead else 0.0,
                                       worker_noise=overhead.worker_noise if overhead else 0.0)
                t = float(np.mean(res.iteration_time))
            by_run[key] = overhead.iteration_time(t) if overhead else t
        return {c["name"]: by_run[self._view_key(c, overhead)] for c in self.configs}

    @staticmethod
    def _fallback_mean(mw: MultiWorker, order: Mapping[str, int], iterations: int,
                       seed: int, overhead: Overhead) -> float:
        """The mean iteration time of an order enforced by the sender hook, each worker's
        step falling back to an arbitrary order (a random permutation, as the baseline's)
        with probability ``overhead.sender_fallback``, independently per worker and
        iteration (:func:`~commsched.cost.overhead.fit_fallback`); each worker's compute
        with its noise factor, as :func:`commsched.tictac.sim.run` draws it."""
        rng = np.random.default_rng([seed, 4])
        fixed = rank_priorities(mw, order)
        perm = np.broadcast_to(np.arange(mw.n_recvs, dtype=float), fixed.shape)
        times = []
        for t in range(iterations):
            fell = rng.random(mw.n_workers) < overhead.sender_fallback
            rk = np.where(fell[:, None], rng.permuted(perm, axis=1), fixed)
            prio = rk + 0.5 * rng.random(fixed.shape)
            f = worker_noise_factors(overhead.worker_noise, mw.n_workers, rng)
            d = mw.base_duration * np.where(mw.is_net, 1.0, f[mw.op_worker])
            times.append(simulate_iteration(mw, prio, d, validate_schedule=t == 0,
                                            contention=overhead.contention).iteration_time)
        return float(np.mean(times))

    def _view_key(self, c: Mapping[str, Any], overhead: Overhead | None) -> tuple[str, str]:
        """A config's simulated view and order: ``(hook, order)``; the hook only with
        overheads, as only they differ by hook."""
        return (str(c["enforce"]) if overhead else "none", str(c["order"]))

    def predict_achieved(self, n_workers: int, overhead: Overhead,
                         achieved: Mapping[str, Sequence[np.ndarray]]) -> dict[str, float]:
        """The simulator's mean iteration time of every config with the orders the live
        run *achieved*.

        One simulated iteration per traced step of the config, every worker's recvs
        ranked by their arrival in that step, with ``overhead`` applied (its per-hook
        view for each config, its contention; not its sender fallback or workers'
        spread, as the orders are the run's own and each step is simulated once). This
        separates the simulator's error from the hook's: the intended order is what
        :meth:`predict` simulates.

        Parameters
        ----------
        n_workers : int
            Workers sharing each server's channel.
        overhead : Overhead
            The runtime overheads.
        achieved : mapping
            ``{config: [ranks per traced step]}``, this workload's entry of
            :func:`achieved_ranks`.

        Returns
        -------
        dict of str to float
            ``{config name: seconds}``.

        Raises
        ------
        CommschedError
            If a config has no traced step (``live.trace_iterations`` is 0).
        """
        composed = {key: compose(overhead.for_hook(self.view, key[0],
                                                   self.recv_orders.get(key[1])), n_workers)
                    for key in dict.fromkeys(self._view_key(c, overhead)
                                             for c in self.configs)}
        tie = np.random.default_rng(0).random((n_workers, len(self.view.graph["recvs"])))
        out = {}
        for c in self.configs:
            ranks = achieved.get(c["name"]) or []
            if not ranks:
                raise CommschedError(f"{self.group_id} {c['name']}: no traced step to take "
                                     "the achieved order from (live.trace_iterations)")
            mw = composed[self._view_key(c, overhead)]
            times = [simulate_iteration(mw, rk + 0.5 * tie,
                                        contention=overhead.contention).iteration_time
                     for rk in ranks]
            out[c["name"]] = overhead.iteration_time(float(np.mean(times)))
        return out


def achieved_ranks(results: Sequence[Mapping[str, Any]], loads: Sequence[Workload],
                   n_workers: int) -> dict[str, dict[str, list[np.ndarray]]]:
    """The order in which every worker's parameters arrived, per traced step.

    Parameters
    ----------
    results : sequence of mapping
        The job clients' results (one per group, config and worker).
    loads : sequence of Workload
        The workloads the results belong to.
    n_workers : int
        Workers of the run; a traced step without every worker's trace is left out.

    Returns
    -------
    dict
        ``{group id: {config: [ranks per traced step]}}``, each an ``(n_workers,
        n_recvs)`` array: every worker's view recvs (in the order of
        :func:`commsched.tictac.sim.compose`) ranked by the arrival of their variable
        (ties by name; a recv whose variable did not arrive in the trace ranks last).
        Live variables are matched to the trace's by :func:`live_names`.
    """
    by_group = {w.group_id: w for w in loads}
    recvs_of = {g: [n for n, a in w.view.nodes(data=True) if a["kind"] == "recv"]
                for g, w in by_group.items()}
    steps: dict[tuple[str, str], dict[int, dict[int, dict[str, float]]]] = {}
    for r in results:
        w = by_group[r["group"]]
        trace_vars = w.view.graph["recvs"]
        to_live = live_names(w, r, trace_vars.values())
        per = steps.setdefault((r["group"], r["config"]), {})
        for k, tr in enumerate(r["traces"]):
            arrival = {x["var"]: float(x["end"]) for x in tr["recvs"]}
            per.setdefault(k, {})[int(r["task"])] = {
                op: arrival.get(to_live.get(trace_vars[op], ""), math.inf)
                for op in recvs_of[r["group"]]}
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for (group, config), per in steps.items():
        ranks = []
        for k in sorted(per):
            if len(per[k]) != n_workers:
                continue
            ops = recvs_of[group]
            rk = np.empty((n_workers, len(ops)))
            for task, arr in per[k].items():
                order = sorted(range(len(ops)), key=lambda i: (arr[ops[i]], ops[i]))
                rk[task, order] = np.arange(len(ops))
            ranks.append(rk)
        out.setdefault(group, {})[config] = ranks
    return out


def load_workloads(params: LiveParams, traces: Sequence[str]) -> list[Workload]:
    """Views, orders, configs and predictions of every configured model and mode.

    Parameters
    ----------
    params : LiveParams
        The ``live`` section.
    traces : sequence of str
        Traced graphs; each configured model and mode takes the one whose ``meta`` has
        its model, mode, batch and input size.

    Returns
    -------
    list of Workload
        In config order (models, then modes), with :attr:`Workload.predicted` set.

    Raises
    ------
    CommschedError
        If a configured model and mode has no trace among ``traces``, or a trace cannot
        be read.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Algs. 2-3 (the orders) and
       Sec. 5 (enforcing them per variable).
    """
    found: dict[tuple[str, str, int, int | None], nx.DiGraph] = {}
    for path in traces:
        g = load_trace(path)
        meta = g.graph.get("meta", {})
        found[(meta.get("model"), meta.get("mode"), meta.get("batch"), meta.get("size"))] = g
    out = []
    pairs = [(m, mode) for m in params.models for mode in params.modes]
    for m, mode in progress(pairs, "live views, orders, predictions"):
        bw = net.parse_rate(m.bandwidth)
        key = (m.model, mode, m.batch[mode], m.size)
        if key not in found:
            raise CommschedError(
                f"no trace of {m.model} ({mode}, batch {m.batch[mode]}, size {m.size}) "
                f"among --traces; rule live_trace makes it")
        trace = found[key]
        view = ps_view(trace, n_servers=params.ps, link=LinkModel(0.0, bw))
        recv_orders = {name: ORDERINGS[name](view) for name in
                       dict.fromkeys(o for o, _ in params.configs)}
        var_orders = {name: variable_priorities(view, {k: float(v) for k, v in o.items()})
                      for name, o in recv_orders.items()}
        recv_vars = view.graph["recvs"]
        traced_vars = {v: list(trace.graph["variables"][v]["shape"])
                       for v in recv_vars.values()}
        configs: list[dict[str, Any]] = [{
            "name": "baseline", "order": "none", "enforce": "none", "priorities": {},
            "trace_iterations": params.baseline_trace_iterations}]
        for name, hook in params.configs:
            configs.append({"name": f"{name}-{hook}", "order": name, "enforce": hook,
                            "priorities": var_orders[name],
                            "traced_variables": traced_vars})
        comm = params.workers * sum(a["bytes"] for _, a in view.nodes(data=True)
                                    if a["kind"] == "recv") / bw
        comp = oracle_compute(view)[0]
        w = Workload(m.model, mode, m.batch[mode], m.size, m.bandwidth, view, var_orders,
                     recv_orders, configs, {}, comm / comp if comp else math.inf)
        w.predicted = w.predict(params.workers, params.sim_iterations, params.seed)
        out.append(w)
    return out


def oracle_compute(view: nx.DiGraph) -> tuple[float, int]:
    """The time oracle's compute load of one worker.

    Parameters
    ----------
    view : networkx.DiGraph
        A parameter-server view.

    Returns
    -------
    seconds : float
        The summed duration of its ops that are not transfers (``recv``, ``send``).
    ops : int
        Their number.
    """
    comp = [float(a["duration"]) for _, a in view.nodes(data=True)
            if a["kind"] not in ("recv", "send")]
    return math.fsum(comp), len(comp)


def live_names(w: Workload, r: Mapping[str, Any], variables: Iterable[str]
                ) -> dict[str, str]:
    """The live names of traced variables.

    Parameters
    ----------
    w : Workload
        The workload (its view's ``variables`` give the traced shapes).
    r : mapping
        One job client's result (its ``variables`` give the live shapes).
    variables : iterable of str
        Traced variable names.

    Returns
    -------
    dict of str to str
        ``{traced variable: live name}``, matched by
        :func:`commsched.tictac.live.order.match_variables`.

    Raises
    ------
    CommschedError
        If a variable has no live counterpart of the same shape.
    """
    traced = {v: list(w.view.graph["variables"][v]["shape"]) for v in dict.fromkeys(variables)}
    live = {v: list(info["shape"]) for v, info in r["variables"].items()}
    return match_variables(traced, live)


def live_reference(w: Workload, r: Mapping[str, Any]) -> dict[str, float]:
    """The reference order of a result: TAC's variable priorities under the live names.

    The baseline enforces nothing; its order agreement is measured against this order.

    Parameters
    ----------
    w : Workload
        The workload (its ``tac`` order, else its first one).
    r : mapping
        One job client's result.

    Returns
    -------
    dict of str to float
        ``{live variable: priority}``.
    """
    ref = w.orders.get("tac") or next(iter(w.orders.values()), {})
    mapping = live_names(w, r, ref)
    return {mapping[v]: p for v, p in ref.items()}
