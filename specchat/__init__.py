"""specchat: a terminal chat that runs speculative decoding and shows it live.

Layers (arrows point one way; tests/test_layering.py enforces it):
cli -> tui -> chat -> engine, chat -> models -> engine (protocol only).
"""

__version__ = "0.1.0"
