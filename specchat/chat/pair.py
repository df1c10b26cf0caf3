"""The typed pair protocol: what the chat layer needs from a loaded draft/target pair.

`models.loader.LoadedPair` satisfies it; so does any test double with these
attributes. The chat layer depends on this shape, never on how the pair was loaded
(transformers, llama.cpp, a tiny random model in a test). No torch, no models here.
"""

from __future__ import annotations

from typing import Any, Protocol


class Pair(Protocol):
    """A loaded pair, as the conversation and the benchmarks use it."""

    config: Any
    """The pair's configuration: its `name`, `k`, `temperature`, `top_k`, `top_p`."""
    target: Any
    """The target model behind the engine's `CausalModel` protocol."""
    draft: Any
    """The draft: a `CausalModel`, an n-gram lookup (`max_ngram`, `min_ngram`) or None."""
    tokenizer: Any
    device: str
    dtype: str
    load_s: float

    @property
    def device_label(self) -> str:
        """Where the target computes, as shown ("cpu", "cuda", "CUDA (llama.cpp)")."""
        ...
    @property
    def draft_model(self) -> Any:
        """The draft when it is a model (behind `CausalModel`), else None (an n-gram lookup or
        no draft): what the benchmarks time and hand to transformers or llama.cpp's programs."""
        ...
    @property
    def eos_ids(self) -> set[int]: ...
    @property
    def has_draft(self) -> bool: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def context_length(self) -> int: ...
