"""Speculative decoding over token ids: torch and the standard library only.

The engine knows nothing about text, tokenizers, model files or user interfaces.
`Decoder.generate` yields one `Round` per verify pass and a final `Finished`.

The package's names load lazily (a module `__getattr__`): importing a torch-free
submodule such as `specchat.engine.theory` does not import torch, so the TUI and the
chat layer's figures can use it on their startup path.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "CausalModel": "protocol", "Decoder": "decoder", "EngineInvariantError": "decoder",
    "Event": "events", "Finished": "events", "Round": "events", "Settings": "decoder",
    "ModelDrafter": "drafters", "NgramDrafter": "drafters", "Proposal": "drafters",
    "HeadDrafter": "head_drafter", "DraftHead": "protocol", "FeatureSource": "protocol",
    "LookupFirstDrafter": "drafters",
    "SamplingParams": "params", "SpecStats": "stats",
}

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from specchat.engine.decoder import (Decoder as Decoder,
                                         EngineInvariantError as EngineInvariantError,
                                         Settings as Settings)
    from specchat.engine.drafters import (LookupFirstDrafter as LookupFirstDrafter,
                                          ModelDrafter as ModelDrafter,
                                          NgramDrafter as NgramDrafter, Proposal as Proposal)
    from specchat.engine.events import Event as Event, Finished as Finished, Round as Round
    from specchat.engine.head_drafter import HeadDrafter as HeadDrafter
    from specchat.engine.params import SamplingParams as SamplingParams
    from specchat.engine.protocol import (CausalModel as CausalModel, DraftHead as DraftHead,
                                          FeatureSource as FeatureSource)
    from specchat.engine.stats import SpecStats as SpecStats


def __getattr__(name: str) -> Any:
    """Import the submodule that defines `name` on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module 'specchat.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"specchat.engine.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
