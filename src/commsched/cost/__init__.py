"""Cost models: links, ring all-reduce, fitted affine models, runtime overheads.

* :mod:`commsched.cost.network` -- point-to-point links, ring all-reduce, linear fits;
* :mod:`commsched.cost.allreduce` -- the one all-reduce cost factory and its fit to a
  measurement (PACE Sec. II-C, Fig. 3);
* :mod:`commsched.cost.overhead` -- runtime overheads fitted from live traces.

Generic: imports only the leaves and the model, never a work package.
"""

from commsched.cost import network
from commsched.cost.network import *  # noqa: F403

__all__ = network.__all__  # the package re-exports network's names, listed once there
