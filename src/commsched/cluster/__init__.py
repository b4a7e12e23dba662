"""Parameter-server clusters for the live experiments.

:mod:`commsched.cluster.emulated` (the API: :func:`emulated_cluster`, :func:`status`,
:class:`HostCluster`), :mod:`commsched.cluster.net` (namespaces, veth, bridge, ``tbf``, or
``htb`` classes per peer), :mod:`commsched.cluster.procs` (processes by PID),
:mod:`commsched.cluster.state` (run records), :mod:`commsched.cluster.server` (one
TensorFlow gRPC server). Importing this package does not import TensorFlow.
"""

from commsched.cluster.emulated import (
    ClusterConfig,
    ClusterInterrupted,
    EmulatedCluster,
    HostCluster,
    emulated_cluster,
    status,
)
from commsched.cluster.net import check_support

__all__ = [
    "ClusterConfig",
    "ClusterInterrupted",
    "EmulatedCluster",
    "HostCluster",
    "check_support",
    "emulated_cluster",
    "status",
]
