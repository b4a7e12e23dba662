"""Communication views of a traced graph: what a worker runs in distributed training.

* :func:`ps_view` -- parameter-server training (TicTac Sec. 2.3-2.4): recv ops for the
  parameters, send ops for the gradients, one network channel per server.
* :func:`allreduce_view` -- all-reduce training (PACE Sec. IV-A): one all-reduce op per
  gradient-producing op, preceding the next iteration's forward consumers.

Both take the single-device traced graph of one training iteration
(:mod:`commsched.views.common` describes what they read from it) and return a valid op
graph that :func:`commsched.sim.simulate` runs.
"""

from __future__ import annotations

from commsched.views.allreduce import allreduce_view
from commsched.views.ps import ps_view, recv_params, shard_parameters

__all__ = ["allreduce_view", "ps_view", "recv_params", "shard_parameters"]
