"""Which adapter computes each model's logits, chosen here and only here, with the reason.

Backend (the pair key `backend`, or `--backend`):
- `torch`: transformers weights (a GGUF file is converted once, see models/gguf/cache.py);
- `llama.cpp`: a GGUF file decoded by llama.cpp (models/llamacpp/model.py), its layers
  offloaded to the GPU where the installed build supports it (CUDA, Metal, Vulkan);
- `auto`: llama.cpp for a GGUF target (a `.gguf` path, `hf:…/FILE.gguf`, `ollama:NAME` or
  a `builtin:` GGUF model) when llama-cpp-python is installed, unless a CUDA device is
  configured and the build cannot offload to it; torch otherwise.
A draft may run on another backend than its target: a GGUF draft of a llama.cpp target
runs on llama.cpp too; any other draft (a folder, a hub id, a `specchat distill` draft)
runs on torch.

llama.cpp's GPU offload (the pair key `gpu_layers`): "all" (the default) offloads every
layer where the build supports it and keeps the CPU where it does not; 0 keeps the CPU; N
offloads N layers and is an error on a build that cannot.

Which torch forward runs (the static cache, the lean CPU forward, transformers' own) is
the torch backend's choice (models/torch_backend/adapter.py), steered by the pair keys
`torch_forward` and `cuda_graphs`. Knows nothing about files, tokenizers or decoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from specchat.errors import PairError
from specchat.models.config.pairs import PairConfig, cuda_index
from specchat.models.config.refs import GGUF_KINDS, builtin_draft, parse_ref

LLAMA_INSTALL = "pip install 'specchat[llama]' (or make install)"
LLAMA_GPU_INSTALL = ("CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install --force-reinstall --no-cache-dir "
                     "llama-cpp-python (-DGGML_METAL=on on a Mac, -DGGML_VULKAN=on for Vulkan)")


@dataclass(frozen=True)
class Backends:
    """The backend of each model of a pair, and why."""

    target: str
    """"torch" or "llama.cpp"."""
    draft: str | None
    """"torch", "llama.cpp", or None for an n-gram drafter or no draft."""
    why: str
    gpu_layers: int = 0
    """Layers llama.cpp offloads to the GPU (-1: all, 0: none); 0 for torch."""
    gpu: str | None = None
    """The GPU backend llama.cpp offloads to ("CUDA", "Metal", ...), None on the CPU."""
    main_gpu: int | None = None
    """The one GPU llama.cpp puts every offloaded layer on (device = "cuda:N"), None for
    llama.cpp's default (GPU 0, layers split across every GPU)."""


def is_gguf(text: str) -> bool:
    """Whether a model reference names a GGUF file (a path, `hf:…/FILE.gguf`, an ollama model
    or a built-in GGUF model)."""
    ref = parse_ref(text)
    return ref.kind in GGUF_KINDS or (ref.kind == "builtin" and builtin_draft(ref.value) is None)


def choose_backends(pair: PairConfig, device: str) -> Backends:
    """Backends for `pair` on the resolved `device` (a `PairError` for an impossible choice)."""
    target, why = target_backend(pair, device)
    draft = draft_backend(pair.draft, target)
    if target == "llama.cpp" and draft == "torch":
        why += "; the draft is not a GGUF file, so it runs on torch"
    if target != "llama.cpp":
        return Backends(target, draft, why)
    layers, gpu, offload_why = llamacpp_offload(pair)
    main_gpu = cuda_index(pair.device) if layers else None
    return Backends(target, draft, f"{why}; {offload_why}", layers, gpu, main_gpu)


def target_backend(pair: PairConfig, device: str) -> tuple[str, str]:
    gguf = is_gguf(pair.target)
    if pair.backend == "torch":
        return "torch", "as configured"
    if pair.backend == "llama.cpp":
        require_llama_cpp(pair, gguf)
        return "llama.cpp", "as configured"
    if not gguf:
        return "torch", "auto: the target is not a GGUF file"
    from specchat.models.llamacpp.model import missing

    problem = missing()
    if problem:
        return "torch", f"auto: {problem}; for llama.cpp's speed: {LLAMA_INSTALL}"
    if device.startswith("cuda") and not cuda_offload():
        return "torch", (f"auto: a CUDA device is configured ({device}) and this llama-cpp-python "
                         f"build cannot offload to it; for llama.cpp on the GPU: {LLAMA_GPU_INSTALL}")
    if device.startswith("cuda"):
        return "llama.cpp", "auto: a GGUF target and a llama-cpp-python build that offloads to CUDA"
    return "llama.cpp", "auto: a GGUF target, llama-cpp-python is installed"


def cuda_offload() -> bool:
    from specchat.models.llamacpp.model import gpu_offload

    return gpu_offload() in ("CUDA", "HIP", "Vulkan")


def require_llama_cpp(pair: PairConfig, gguf: bool) -> None:
    where = f"pair '{pair.name}': backend = \"llama.cpp\""
    if not gguf:
        raise PairError(f"{where} needs a GGUF target, and {pair.target} is not a .gguf file: "
                        "use backend = \"torch\" or \"auto\"")
    from specchat.models.llamacpp.model import missing

    problem = missing()
    if problem:
        raise PairError(f"{where}: {problem}; install it: {LLAMA_INSTALL}")
    if pair.device.startswith("cuda") and not cuda_offload():
        raise PairError(f"{where} with device = \"{pair.device}\": this llama-cpp-python build "
                        f"cannot offload to a CUDA device; set device = \"cpu\" or \"auto\", "
                        f"use backend = \"torch\", or install a CUDA build: {LLAMA_GPU_INSTALL}")


def llamacpp_offload(pair: PairConfig) -> tuple[int, str | None, str]:
    """(layers to offload: -1 all, 0 none; the GPU backend or None; why) for a llama.cpp
    target, from the pair keys `gpu_layers` and `device` and what the installed build
    supports."""
    from specchat.models.llamacpp.model import gpu_offload

    if pair.gpu_layers == 0:
        return 0, None, "gpu_layers = 0 keeps it on the CPU"
    if pair.device == "cpu":
        return 0, None, "device = \"cpu\" keeps it on the CPU"
    gpu = gpu_offload()
    if gpu is None and pair.gpu_layers != "all":
        raise PairError(f"pair '{pair.name}': gpu_layers = {pair.gpu_layers}, but this "
                        f"llama-cpp-python build cannot offload to a GPU: set gpu_layers = 0, or "
                        f"install a GPU build: {LLAMA_GPU_INSTALL}")
    if gpu is None:
        return 0, None, "on the CPU (this llama-cpp-python build has no GPU offload)"
    main_gpu = cuda_index(pair.device)
    where = gpu if main_gpu is None else f"{gpu} device {main_gpu}"
    chosen = "" if main_gpu is None else f", device = \"{pair.device}\""
    if pair.gpu_layers == "all":
        return -1, gpu, f"every layer on {where} (gpu_layers = \"all\"{chosen})"
    return (int(pair.gpu_layers), gpu,
            f"{pair.gpu_layers} layers on {where} (gpu_layers{chosen})")


def draft_backend(draft: str | None, target: str) -> str | None:
    if draft is None or parse_ref(draft).kind == "ngram":
        return None
    return "llama.cpp" if target == "llama.cpp" and is_gguf(draft) else "torch"
