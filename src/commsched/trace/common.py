"""What the TensorFlow and PyTorch tracers share: argument checks, the processor's name,
the run's provenance in ``meta`` and the coverage check.

Import-light: no framework is imported here (:mod:`commsched.trace.tf` and
:mod:`commsched.trace.torch` do that).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from typing import Any

from commsched import __version__
from commsched.errors import CommschedError

__all__ = ["check_args", "check_coverage", "cpu_model", "op_time_sums", "run_meta"]


def check_args(batch: int, mode: str, warmup: int, iterations: int,
               min_coverage: float) -> None:
    """Check the arguments every tracer takes.

    Parameters
    ----------
    batch : int
        The batch size (>= 1).
    mode : str
        ``"train"`` or ``"infer"``.
    warmup, iterations : int
        Untraced warm-up steps (>= 0) and traced steps (>= 1).
    min_coverage : float
        The fraction of ops that must get a time, in [0, 1].

    Raises
    ------
    CommschedError
        One line naming the first bad argument.
    """
    if batch < 1:
        raise CommschedError(f"batch must be >= 1, got {batch}")
    if mode not in ("train", "infer"):
        raise CommschedError(f"mode must be 'train' or 'infer', got {mode!r}")
    if warmup < 0 or iterations < 1:
        raise CommschedError(f"need warmup >= 0 and iterations >= 1, got {warmup}, {iterations}")
    if not 0.0 <= min_coverage <= 1.0:
        raise CommschedError(f"min_coverage must be in [0, 1], got {min_coverage}")


def cpu_model() -> str:
    """A human-readable name of this machine's processor and its core count.

    Returns
    -------
    str
        ``/proc/cpuinfo``'s model name with the core count, else what :mod:`platform` says.
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_meta(mode: str, lr: float, seed: int) -> dict[str, Any]:
    """The last keys of every trace's ``meta``: optimizer, seed, version, creation time.

    Parameters
    ----------
    mode : str
        ``"train"`` (an SGD optimizer with learning rate ``lr``) or ``"infer"`` (none).
    lr : float
        The learning rate.
    seed : int
        The seed of the weights and the synthetic batch.

    Returns
    -------
    dict
        ``optimizer``, ``seed``, ``commsched_version`` and ``created_utc``.
    """
    return {
        "optimizer": f"SGD lr={lr}" if mode == "train" else None, "seed": seed,
        "commsched_version": __version__,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def op_time_sums(samples: dict[str, list[float]], iterations: int) -> list[float]:
    """The sum of the ops' times in each traced step (``meta["sum_op_s"]``).

    Parameters
    ----------
    samples : dict of str to list of float
        Every op's times, one per step it got a time in.
    iterations : int
        The traced steps.

    Returns
    -------
    list of float
        One sum per step, rounded to the nanosecond.
    """
    return [round(sum(s[k] for s in samples.values() if len(s) > k), 9)
            for k in range(iterations)]


def check_coverage(meta: dict[str, Any], model: str, mode: str, counted: int,
                   min_coverage: float) -> None:
    """Refuse a trace whose ``meta["coverage"]`` is below ``min_coverage``.

    Parameters
    ----------
    meta : dict
        The trace's meta, with ``coverage`` and ``untimed_ops``.
    model, mode : str
        The traced model and mode, for the message.
    counted : int
        How many ops the coverage counts.
    min_coverage : float
        The fraction of ops that must have a time in every traced step.

    Raises
    ------
    CommschedError
        If the coverage is too low; names the first untimed ops.
    """
    if meta["coverage"] < min_coverage:
        raise CommschedError(
            f"{model} ({mode}): only {meta['coverage']:.1%} of {counted} ops got a time "
            f"(need {min_coverage:.0%}); untimed: {', '.join(meta['untimed_ops'][:5])}"
        )
