"""Models the live job can run: the tracing zoo's, plus ``tiny`` for the CI test.

``tiny`` is a three-layer perceptron (256 -> 1024 -> 1024 -> 10, 1.3 M parameters,
5.1 MB in float32): big enough that its transfers take tens of milliseconds at 1 Gbit/s,
small enough that a whole cluster test stays within the CI budget. Every other name is
looked up in :mod:`commsched.trace.zoo`, so the live job builds exactly the model that was
traced.
"""

from __future__ import annotations

from typing import Any

from commsched.errors import CommschedError

__all__ = ["build_model"]


def _tiny() -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input((256,)),
            keras.layers.Dense(1024, activation="relu", name="fc1"),
            keras.layers.Dense(1024, activation="relu", name="fc2"),
            keras.layers.Dense(10, name="logits"),
        ],
        name="tiny",
    )


def build_model(name: str) -> Any:
    """A freshly built Keras model named ``name`` (random weights, never downloaded)."""
    if name == "tiny":
        return _tiny()
    try:
        from commsched.trace import zoo
    except ImportError:
        raise CommschedError(
            f"model {name!r}: the model zoo (commsched.trace.zoo) is not available; "
            "only 'tiny' is built in"
        ) from None
    return zoo.build(name)
