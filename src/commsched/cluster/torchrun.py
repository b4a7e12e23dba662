"""The ``torchrun`` command of one host of a multi-host PyTorch job (c10d rendezvous).

Every host of a job runs one torchrun agent with one worker process::

    torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint FIRST:PORT
        --rdzv-id ID --rdzv-conf is_host=1|0,join_timeout=T --local-addr ADDR
        --max-restarts 0 [--log-dir DIR] -m MODULE ARGS...

``FIRST`` is the first host of the list: its agent (``is_host=1``) hosts the c10d store of
the rendezvous at ``FIRST:PORT``; every other agent connects to it (``is_host=0``, so no
agent has to guess from its host name whether the endpoint is itself, which fails inside
network namespaces and on hosts with several addresses). ``--local-addr`` is the host's
address as the other hosts reach it: the agent that becomes rank 0 serves the workers'
store there (torchrun's ``MASTER_ADDR``). The same command works on real hosts and in
the emulated cluster's namespaces (:mod:`commsched.cluster.emulated`).

torch 2.13's c10d rendezvous ignores ``--node-rank`` (torchrun warns that it is only for
the ``static`` backend) and numbers the agents in the order of their sorted
``--local-addr`` (``DynamicRendezvousHandler``: participants sorted by address, process
id); so the position of a host in the list decides only which host serves the
rendezvous. A worker that must have the rank of its position reads it from its own
config (:mod:`commsched.echelon.live.worker`); symmetric workers take torchrun's ``RANK``
(:mod:`commsched.pace.live.ddp`).

Examples
--------
>>> import shlex
>>> print(shlex.join(hosts_argv(["node1", "node2"], "m", ["c.json"], torchrun=["torchrun"])[1]))
torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node1:29500 \
--rdzv-id commsched --rdzv-conf is_host=0,join_timeout=60 --local-addr node2 \
--max-restarts 0 -m m c.json
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from commsched.errors import CommschedError

__all__ = ["LAUNCHERS", "RDZV_PORT", "TORCHRUN", "hosts_argv", "torchrun_argv"]

#: How the live jobs start their processes: torchrun (one agent and one worker per host,
#: as on real hosts) or the worker module alone, torchrun's environment set by the
#: launcher (``direct``: half the processes).
LAUNCHERS = ("torchrun", "direct")

#: The rendezvous port on the first host (torchrun's default).
RDZV_PORT = 29500
#: torchrun of this interpreter (its environment's torch), for processes started here.
TORCHRUN = (sys.executable, "-m", "torch.distributed.run")


def torchrun_argv(nnodes: int, node: int, endpoint: str, local_addr: str, module: str,
                  args: Sequence[str] = (), run_id: str = "commsched",
                  join_timeout: float = 60.0, log_dir: str | None = None,
                  torchrun: Sequence[str] = TORCHRUN) -> list[str]:
    """The torchrun command of host ``node`` of ``nnodes`` (module docstring).

    Parameters
    ----------
    nnodes : int
        Hosts of the job (one worker each).
    node : int
        This host's position in the host list; host 0 serves the rendezvous.
    endpoint : str
        ``FIRST:PORT``: the first host's address and the rendezvous port.
    local_addr : str
        This host's address as the other hosts reach it.
    module : str
        The worker module (``python -m MODULE ARGS``).
    args : sequence of str
        The worker's arguments.
    run_id : str
        The rendezvous id (``--rdzv-id``): jobs that share an endpoint need distinct ids.
    join_timeout : float
        Bound on the rendezvous: every agent gives up after this many seconds (rounded
        up to whole seconds).
    log_dir : str, optional
        torchrun's log directory (default: a new ``/tmp/torchelastic_*`` per agent, which
        torchrun leaves behind).
    torchrun : sequence of str
        The launcher's command (default: this interpreter's ``torch.distributed.run``;
        ``("torchrun",)`` for commands printed for real hosts).

    Returns
    -------
    list of str
        The command.

    Raises
    ------
    CommschedError
        If ``node`` is not below ``nnodes``, the job has fewer than one host, the endpoint
        is not ``host:port`` or the timeout is not positive.
    """
    host, _, port = endpoint.rpartition(":")
    if nnodes < 1 or not 0 <= node < nnodes:
        raise CommschedError(f"torchrun: host {node} of {nnodes}: need 0 <= host < hosts")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise CommschedError(f"torchrun: rendezvous endpoint {endpoint!r} is not host:port")
    if join_timeout <= 0:
        raise CommschedError(f"torchrun: join timeout {join_timeout:g} s is not positive")
    conf = f"is_host={int(node == 0)},join_timeout={-int(-join_timeout // 1)}"
    return [*torchrun, "--nnodes", str(nnodes), "--nproc-per-node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id,
            "--rdzv-conf", conf, "--local-addr", local_addr, "--max-restarts", "0",
            *(["--log-dir", log_dir] if log_dir else []), "-m", module, *args]


def hosts_argv(hosts: Sequence[str], module: str, args: Sequence[str] = (),
               port: int = RDZV_PORT, run_id: str = "commsched", join_timeout: float = 60.0,
               log_dir: str | None = None, torchrun: Sequence[str] = TORCHRUN
               ) -> list[list[str]]:
    """The torchrun command of every host of a host list, in its order.

    Parameters
    ----------
    hosts : sequence of str
        Every host's address (or name) as the others reach it; the first serves the
        rendezvous on ``port``.
    module, args, run_id, join_timeout, log_dir, torchrun
        As in :func:`torchrun_argv` (``torchrun=("torchrun",)`` for the commands a user
        runs on real hosts: ``shlex.join`` each).
    port : int
        The rendezvous port on the first host.

    Returns
    -------
    list of list of str
        One command per host.

    Raises
    ------
    CommschedError
        If the list is empty or names a host twice (or :func:`torchrun_argv` rejects it).
    """
    if not hosts or len(set(hosts)) != len(hosts):
        raise CommschedError(f"torchrun: need distinct hosts, got {list(hosts)}")
    return [torchrun_argv(len(hosts), i, f"{hosts[0]}:{port}", h, module, args, run_id,
                          join_timeout, log_dir, torchrun) for i, h in enumerate(hosts)]
