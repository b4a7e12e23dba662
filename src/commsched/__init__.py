"""commsched: communication scheduling for distributed deep learning, reproduced.

One library implements TicTac, PACE, EchelonFlow and the TensorFlow graph partitioning
thesis on a shared op-graph model (:mod:`commsched.model.graph`) and simulator
(:mod:`commsched.sim`).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("commsched")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
