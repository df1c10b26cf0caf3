"""Errors a user can act on: each carries a one-line message naming what is wrong
and what to do. The CLI prints the message and exits with status 2.

This module is a leaf: it imports nothing from specchat, so every layer may use it.
"""


class SpecchatError(Exception):
    """A mistake of the user's or of their machine, with an actionable message."""


class ConfigError(SpecchatError):
    """A models.toml or theme file that cannot be used as written."""


class ModelNotFound(SpecchatError):
    """A model reference that resolves to nothing on this machine."""


class PairError(SpecchatError):
    """A draft/target pair that cannot work together (vocabulary, device, quantization)."""


class UsageError(SpecchatError):
    """A command-line value out of range (k < 0, temperature < 0, empty prompt...)."""


class ContextFull(SpecchatError):
    """A conversation longer than the model's KV cache holds."""


class OutOfMemory(SpecchatError):
    """A model, or a round of decoding, that does not fit in the memory there is."""
