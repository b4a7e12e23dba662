"""Op graphs from real and synthetic models.

Submodules: :mod:`commsched.trace.synthetic` (TicTac's Par-N / Seq-N toys and the thesis'
level-based random DAGs). Import-light on purpose: TensorFlow is imported only by the
tracer modules that need it, never here.
"""
