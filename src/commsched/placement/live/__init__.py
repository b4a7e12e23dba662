"""Laich's partitions executed on a TensorFlow cluster of emulated hosts.

:mod:`~commsched.placement.live.mapping` turns a placement and a per-device order into a
``GraphDef`` (devices, control dependencies; no TensorFlow import);
:mod:`~commsched.placement.live.job` is the client that rebuilds a traced graph, applies
each configuration and times its steps on the cluster;
:mod:`~commsched.placement.live.predict` fits the runtime's overheads on the calibration
configurations and predicts every live step with :mod:`commsched.sim.devices`. The driver
is :mod:`commsched.placement.experiments.live`.
"""
