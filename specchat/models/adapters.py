"""Which adapter computes each model's logits, chosen here and only here, with the reason.

Backend (the pair key `backend`, or `--backend`):
- `torch`: transformers weights (a GGUF file is converted once, see gguf_cache);
- `llama.cpp`: a GGUF file decoded by llama.cpp on the CPU (models/llamacpp/model.py);
- `auto`: llama.cpp for a GGUF target (a `.gguf` path or a `builtin:` GGUF model) when
  llama-cpp-python is installed and no CUDA device is configured, torch otherwise.
A draft may run on another backend than its target: a GGUF draft of a llama.cpp target
runs on llama.cpp too; any other draft (a folder, a hub id, a `specchat distill` draft)
runs on torch.

Which torch forward runs (the static cache, the lean CPU forward, transformers' own) is
the torch backend's choice (models/torch_backend/adapter.py), steered by the pair keys
`torch_forward` and `cuda_graphs`. Knows nothing about files, tokenizers or decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from specchat.errors import PairError
from specchat.models.config.pairs import PairConfig
from specchat.models.config.refs import builtin_draft, parse_ref

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
    from specchat.models.llamacpp.model import missing

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
    from specchat.models.llamacpp.model import missing

    problem = missing()
    if problem:
        raise PairError(f"{where}: {problem}; install it: {LLAMA_INSTALL}")


def draft_backend(draft: str | None, target: str) -> str | None:
    if draft is None or parse_ref(draft).kind == "ngram":
        return None
    return "llama.cpp" if target == "llama.cpp" and is_gguf(draft) else "torch"
