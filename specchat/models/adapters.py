"""Which adapter computes each model's logits, chosen here and only here, with the reason.

Backend (the pair key `backend`, or `--backend`):
- `torch`: transformers weights (a GGUF file is converted once, see gguf_cache);
- `llama.cpp`: a GGUF file decoded by llama.cpp on the CPU (models/llamacpp.py);
- `auto`: llama.cpp for a GGUF target (a `.gguf` path or a `builtin:` GGUF model) when
  llama-cpp-python is installed and no CUDA device is configured, torch otherwise.
A draft may run on another backend than its target: a GGUF draft of a llama.cpp target
runs on llama.cpp too; any other draft (a folder, a hub id, a `specchat distill` draft)
runs on torch.

The torch forward: the static cache with CUDA graphs on CUDA, the lean forward on a
CPU where the architecture allows, transformers' eager forward otherwise (the
reduced-vocabulary one for a distilled draft's reduced head). Two environment
variables exist only as debugging overrides, read here and documented in the README:
SPECCHAT_FAST_PATH=1|0 forces the static cache on or off, SPECCHAT_LEAN=0 turns the
lean forward off. Knows nothing about files, tokenizers or decoding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from specchat.errors import PairError
from specchat.models.config import PairConfig
from specchat.models.refs import builtin_draft, parse_ref

FAST_PATH_ENV = "SPECCHAT_FAST_PATH"
LEAN_ENV = "SPECCHAT_LEAN"
LLAMA_INSTALL = "pip install 'specchat[llama]' (or make install)"


@dataclass(frozen=True)
class Backends:
    """The backend of each model of a pair, and why."""

    target: str
    """"torch" or "llama.cpp"."""
    draft: str | None
    """"torch", "llama.cpp", or None for an n-gram drafter or no draft."""
    why: str


def is_gguf(text: str) -> bool:
    """Whether a model reference names a GGUF file (a path or a built-in GGUF model)."""
    ref = parse_ref(text)
    return ref.kind == "gguf" or (ref.kind == "builtin" and builtin_draft(ref.value) is None)


def choose_backends(pair: PairConfig, device: str) -> Backends:
    """Backends for `pair` on the resolved `device` (a `PairError` for an impossible choice)."""
    target, why = target_backend(pair, device)
    draft = draft_backend(pair.draft, target)
    if target == "llama.cpp" and draft == "torch":
        why += "; the draft is not a GGUF file, so it runs on torch"
    return Backends(target, draft, why)


def target_backend(pair: PairConfig, device: str) -> tuple[str, str]:
    gguf = is_gguf(pair.target)
    if pair.backend == "torch":
        return "torch", "as configured"
    if pair.backend == "llama.cpp":
        require_llama_cpp(pair, gguf)
        return "llama.cpp", "as configured"
    if not gguf:
        return "torch", "auto: the target is not a GGUF file"
    if device.startswith("cuda"):
        return "torch", f"auto: a CUDA device is configured ({device}), llama.cpp here is CPU-only"
    from specchat.models.llamacpp import missing

    problem = missing()
    if problem:
        return "torch", f"auto: {problem}; for llama.cpp's speed: {LLAMA_INSTALL}"
    return "llama.cpp", "auto: a GGUF target on the CPU, llama-cpp-python is installed"


def require_llama_cpp(pair: PairConfig, gguf: bool) -> None:
    where = f"pair '{pair.name}': backend = \"llama.cpp\""
    if not gguf:
        raise PairError(f"{where} needs a GGUF target, and {pair.target} is not a .gguf file: "
                        "use backend = \"torch\" or \"auto\"")
    if pair.device.startswith("cuda"):
        raise PairError(f"{where} runs on the CPU, but device = \"{pair.device}\": "
                        "set device = \"cpu\" or \"auto\", or backend = \"torch\"")
    from specchat.models.llamacpp import missing

    problem = missing()
    if problem:
        raise PairError(f"{where}: {problem}; install it: {LLAMA_INSTALL}")


def draft_backend(draft: str | None, target: str) -> str | None:
    if draft is None or parse_ref(draft).kind == "ngram":
        return None
    return "llama.cpp" if target == "llama.cpp" and is_gguf(draft) else "torch"


def torch_adapter(model, device: str, vocab_size: int | None = None, quantized: bool = False,
                  head_ids: list[int] | None = None, int8: bool = False):
    """(adapter, label) for a loaded transformers model: static + compiled on CUDA, lean on
    a CPU where the architecture allows, transformers' eager forward otherwise.

    `head_ids` (a draft's reduced output vocabulary) goes to the lean or the eager
    reduced-vocabulary forward, which multiply only those head rows. `int8` (a draft
    that shipped as int8) lets the lean forward multiply by int8 weights.
    """
    from specchat.models.hf import HFCausalModel
    from specchat.models.lean import LeanLlama, lean_problem
    if not quantized and static_wanted(device) and head_ids is None:
        adapter = static_adapter(model, vocab_size)
        kind = "own Llama forward" if type(adapter).__name__ == "StaticLlama" else "transformers"
        graphs = ", CUDA graphs" if getattr(adapter, "compiled", False) else ""
        return adapter, f"torch ({kind}, static cache{graphs})"
    if not quantized and lean_wanted() and lean_problem(model) is None:
        label = "torch (lean int8)" if int8 else "torch (lean)"
        return LeanLlama(model, vocab_size, head_ids, int8=int8), label
    if head_ids is not None:
        from specchat.models.reduced_vocab import ReducedVocabModel

        return ReducedVocabModel(model, head_ids, vocab_size), "torch (eager, reduced vocabulary)"
    return HFCausalModel(model, vocab_size), "torch (eager)"


def static_adapter(model, vocab_size: int | None = None, max_length: int | None = None,
                   **options):
    """specchat's own static forward (`static_llama.StaticLlama`) for the Llama family,
    transformers' forward over its StaticCache for every other architecture. (Here, not in
    static.py: static_llama builds on static, so static must not import it back.)"""
    from specchat.models.static import StaticCausalModel, static_length
    from specchat.models.static_llama import StaticLlama, owned_problem

    length = max_length or static_length(model.config)
    if owned_problem(model, length) is None:
        return StaticLlama(model, vocab_size, length, **options)
    return StaticCausalModel(model, vocab_size, length, **options)


def adapter_for(model, device: str, vocab_size: int | None = None, quantized: bool = False,
                head_ids: list[int] | None = None, int8: bool = False):
    """The torch adapter alone (see `torch_adapter`)."""
    return torch_adapter(model, device, vocab_size, quantized, head_ids, int8)[0]


def static_wanted(device: str) -> bool:
    """Static cache (and CUDA graphs) on CUDA; SPECCHAT_FAST_PATH=0|1 overrides (debugging)."""
    setting = os.environ.get(FAST_PATH_ENV, "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    return device.startswith("cuda")


def lean_wanted() -> bool:
    """The lean CPU forward unless SPECCHAT_LEAN=0 (a debugging override)."""
    return os.environ.get(LEAN_ENV, "").strip() != "0"
