"""A worker's link utilisation: its interface's byte counters, sampled in a thread.

The live PACE runs record each worker's outbound and inbound traffic every few
milliseconds (:class:`LinkSampler`), the measured analog of PACE's Fig. 10;
:func:`commsched.pace.experiments.live_analysis.utilisation` turns the samples into rates.
"""

from __future__ import annotations

import threading
import time

__all__ = ["LinkSampler"]


class LinkSampler:
    """Samples an interface's byte counters every ``interval`` seconds in a thread.

    Parameters
    ----------
    dev : str
        The interface, as ``/proc/self/net/dev`` (the caller's network namespace) names it.
    interval : float
        Seconds between two samples.

    Attributes
    ----------
    rows : list of list of float
        ``[unix s, tx bytes, rx bytes]`` per sample.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-E and Fig. 10 (a worker's outbound traffic every 5 ms).
    """

    def __init__(self, dev: str = "eth0", interval: float = 0.005) -> None:
        self.dev, self.interval = dev, interval
        self.rows: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="link-sampler", daemon=True)

    def read(self) -> tuple[int, int] | None:
        """The interface's counters now.

        Returns
        -------
        (int, int) or None
            ``(tx bytes, rx bytes)``, None if the interface does not exist.
        """
        with open("/proc/self/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == self.dev:
                    v = rest.split()
                    return int(v[8]), int(v[0])
        return None

    def start(self) -> LinkSampler:
        """Start sampling (nothing happens if the interface does not exist).

        Returns
        -------
        LinkSampler
            ``self``.
        """
        if self.read() is not None:
            self._thread.start()
        return self

    def _run(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            c = self.read()
            if c is not None:
                self.rows.append([time.time(), c[0], c[1]])
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> list[list[float]]:
        """Stop sampling.

        Returns
        -------
        list of list of float
            :attr:`rows`.
        """
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1.0)
        return self.rows
