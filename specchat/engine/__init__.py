"""Speculative decoding over token ids: torch and the standard library only.

The engine knows nothing about text, tokenizers, model files or user interfaces.
`Decoder.generate` yields one `Round` per verify pass and a final `Finished`.
"""

from specchat.engine.decoder import (Decoder, EngineInvariantError, Event, Finished, Round,
                                     Settings)
from specchat.engine.drafters import ModelDrafter, NgramDrafter, Proposal
from specchat.engine.protocol import CausalModel
from specchat.engine.sampling import SamplingParams
from specchat.engine.stats import SpecStats

__all__ = [
    "CausalModel", "Decoder", "EngineInvariantError", "Event", "Finished", "ModelDrafter",
    "NgramDrafter", "Proposal", "Round", "SamplingParams", "Settings", "SpecStats",
]
