"""Live enforcement of transfer orders in TensorFlow's parameter-server runtime.

:mod:`commsched.enforce.order` (variables, priorities and groups; no TensorFlow),
:mod:`commsched.enforce.hooks` (the ``none``/``dag``/``sender`` graph rewrites),
:mod:`commsched.enforce.job` (one worker's client of the synchronous job),
:mod:`commsched.enforce.steptrace` (per-transfer times from FULL_TRACE step stats),
:mod:`commsched.enforce.models` (which models the job can build).
"""

from commsched.enforce.order import match_variables, priority_groups, variable_priorities

__all__ = ["match_variables", "priority_groups", "variable_priorities"]
