"""What every backend object answers: how it loads a target or a draft, and what it loaded.

A backend (torch, llama.cpp, int8) is one object behind `ModelBackend`. It owns, for the
models it runs: loading from a reference, the end-of-sequence ids, the context length,
the logit columns (its vocabulary as the head computes it), the dtype shown to the user,
where the layers went, and the label that says what computes the logits. models/loader.py
asks the backend models/adapters.py chose and never looks inside a model to tell which
backend made it. Knows nothing about any one backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from specchat.engine.protocol import CausalModel
from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import ModelRef

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LoadRequest:
    """What loading a pair's model needs besides its reference."""

    pair: PairConfig
    device: str
    """The resolved device ("cpu", "cuda", "cuda:1")."""
    device_why: str
    dtype: Any
    """The torch dtype the torch backend computes in (resolved from the pair's `dtype`)."""
    dtype_why: str
    threads: int | None = None
    """CPU threads of the CPU backends (None: their own choice)."""
    prefill_threads: int | None = None
    """Their threads while a prompt is read (None: `threads`)."""
    beside_screen: bool = False
    """A screen draws while the pair decodes (the chat): a backend whose threads stall when
    one shares a core with it leaves the screen a core where `threads` is None."""
    gpu_layers: int = 0
    gpu: str | None = None
    main_gpu: int | None = None
    """llama.cpp's offload (models/adapters.Backends)."""
    progress: Progress = lambda _: None


@dataclass
class LoadedModel:
    """One model as its backend loaded it, before the pair's shared vocabulary is known."""

    raw: Any
    """The backend's own object (a transformers model, a LlamaCppModel, an Int8Model)."""
    logit_columns: int
    """Columns of logits its head computes (a padded head has more than its tokenizer)."""
    tokenizer: Any = None
    """A target's tokenizer; a draft's own where it is not its target's (None: it shares
    the target's, models/vocabulary.py)."""
    eos: frozenset[int] = frozenset()
    context: int = 2048
    """Most tokens its cache holds (its trained context, or llama.cpp's n_ctx)."""
    device: str = "cpu"
    """Where its logits are computed and sampled."""
    device_why: str = ""
    weights: str = ""
    """The weights' type as shown to the user ("bfloat16", "Q4_K_M", "int8 from Q4_K_M")."""
    weights_why: str = ""
    placement: str = ""
    """Where its layers went ("all on cuda", "cuda:0 22 layers, cpu 10 layers")."""
    offloaded_to: str | None = None
    """The GPU a llama.cpp model's layers run on ("CUDA", "Metal"), None elsewhere."""
    options: dict[str, Any] = field(default_factory=dict)
    """How its backend adapts it to the engine (the torch forward's keywords)."""


class ModelBackend(Protocol):
    """One backend: loads models and adapts them to the engine (module docstring)."""

    name: str

    def device(self, device: str, device_why: str, gpu: str | None) -> tuple[str, str]:
        """(where its logits are computed and sampled, why), for the pair's resolved device
        and the GPU llama.cpp offloads to (None: none)."""
        ...

    def load_target(self, ref: ModelRef, request: LoadRequest) -> LoadedModel:
        """The pair's target and its tokenizer."""
        ...

    def load_draft(self, ref: ModelRef, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        """The pair's draft, with its own tokenizer where it does not share `target`'s."""
        ...

    def load_head(self, path: Any, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        """A draft head (models/head/, the file at `path`) beside `target`, whose features it
        reads; backends that cannot hand over features have none (models/adapters.py
        refuses such pairs)."""
        ...

    def engine_model(self, loaded: LoadedModel, vocab_size: int,
                     request: LoadRequest) -> tuple[CausalModel, str]:
        """(the model behind the engine's protocol, its label), computing `vocab_size`
        logit columns (the columns the pair's two models share)."""
        ...
