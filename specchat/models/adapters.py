"""Which backend computes each model's logits, chosen here and only here, with the reason;
and the backend object of each name (`backend_named`).

Backend (the pair key `backend`, or `--backend`):
- `torch`: transformers weights (a GGUF file is converted once, see models/gguf/cache.py);
- `llama.cpp`: a GGUF file decoded by llama.cpp (models/llamacpp/model.py), its layers
  offloaded to the GPU where the installed build supports it (CUDA, Metal, Vulkan);
- `int8`: a GGUF file converted once to int8 rows and run on the CPU by fbgemm (a large
  target by oneDNN where the CPU has AMX; models/int8/), where a verify of k + 1 tokens
  costs little more than one step;
- `auto`: for a GGUF target (a `.gguf` path, `hf:…/FILE.gguf`, `ollama:NAME` or a
  `builtin:` GGUF model) on a CPU, int8 when the pair speculates (a draft, k not 0) and
  this CPU and torch run it, since on llama.cpp's x86 kernels a verify costs nearly a step
  per token and speculation rarely pays; llama.cpp otherwise (plain decoding reads the
  4-bit file's fewer bytes), and on a GPU the build can offload to; torch for everything
  else.
A draft may run on another backend than its target: a GGUF draft (or a `specchat distill`
draft, from its GGUF form) of a llama.cpp or int8 target runs on that backend too; any
other draft (a folder, a hub id) runs on torch. A draft head (`specchat distill --head`)
runs on its target's backend, int8 or torch, whose forwards hand it the hidden states; on
a GPU `auto` picks torch for such a pair, on a CPU int8 even at k = 0 (a plain-decoding
comparison of the pair, whose k the chat can turn back up), and llama.cpp is refused.

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
from specchat.models.config.refs import GGUF_KINDS, builtin_draft, head_file, parse_ref

LLAMA_INSTALL = "pip install 'specchat[llama]' (or make install)"
LLAMA_GPU_INSTALL = ("CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install --force-reinstall --no-cache-dir "
                     "llama-cpp-python (-DGGML_METAL=on on a Mac, -DGGML_VULKAN=on for Vulkan)")


@dataclass(frozen=True)
class Backends:
    """The backend of each model of a pair, and why."""

    target: str
    """"torch", "llama.cpp" or "int8"."""
    draft: str | None
    """"torch", "llama.cpp", "int8", or None for an n-gram drafter or no draft."""
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
    if is_head_ref(text):
        return False
    return ref.kind in GGUF_KINDS or (ref.kind == "builtin" and builtin_draft(ref.value) is None)


def is_head_ref(text: str | None) -> bool:
    """Whether a draft reference names a draft head (models/head/): it runs on its target's
    backend, reading the target's features."""
    return text is not None and text != "" and head_file(parse_ref(text)) is not None


GGUF_BACKENDS = ("llama.cpp", "int8")
"""Backends that run a GGUF file as it is on disk (no transformers folder)."""


def backend_named(name: str):
    """The backend object (models/backend.py's `ModelBackend`) of a backend's name."""
    if name == "llama.cpp":
        from specchat.models.backend_llamacpp import LlamaCppBackend

        return LlamaCppBackend()
    if name == "int8":
        from specchat.models.backend_int8 import Int8Backend

        return Int8Backend()
    from specchat.models.backend_torch import TorchBackend

    return TorchBackend()


def choose_backends(pair: PairConfig, device: str) -> Backends:
    """Backends for `pair` on the resolved `device` (a `PairError` for an impossible choice)."""
    target, why = target_backend(pair, device)
    if target == "llama.cpp" and is_head_ref(pair.draft):
        raise PairError(f"pair '{pair.name}': the draft head {pair.draft} reads the target's "
                        "hidden states, which specchat takes from the int8 and torch backends, "
                        "not llama.cpp: set backend = \"int8\" (CPU) or \"torch\" (GPU)")
    draft = draft_backend(pair.draft, target)
    if target in GGUF_BACKENDS and draft == "torch":
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
    if pair.backend == "int8":
        require_int8(pair, gguf, device)
        return "int8", "as configured"
    if not gguf:
        return "torch", "auto: the target is not a GGUF file"
    if device.startswith("cuda") and is_head_ref(pair.draft):
        return "torch", ("auto: a draft head reads the target's hidden states, which the torch "
                         "backend's static forward hands over on a GPU")
    int8_why = int8_choice(pair, device)
    if int8_why:
        return "int8", int8_why
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


def int8_choice(pair: PairConfig, device: str) -> str | None:
    """Why `auto` runs a GGUF target on int8, or None where it does not (module docstring)."""
    head = is_head_ref(pair.draft)
    if device != "cpu" or not pair.draft or (pair.k == 0 and not head):
        return None
    from specchat.models.backend_int8 import int8_support

    if not int8_support().usable or int8_problem(pair.target) is not None:
        return None
    if pair.k == 0:
        return ("auto: the pair's draft head reads the target's hidden states, which the int8 "
                "backend hands over on a CPU (k = 0 here, and the chat can raise it)")
    return ("auto: a GGUF target that speculates on a CPU runs on int8, where a "
            "verify of k + 1 tokens costs little more than one step")


def int8_problem(target: str) -> str | None:
    """Why the GGUF file a target names cannot run on int8 (its architecture, its rope), or
    None; a file whose header cannot be read yet (not on disk) is "an unknown architecture"."""
    from pathlib import Path

    from specchat.models.config.refs import builtin_architecture
    from specchat.models.gguf.header import leading_metadata
    from specchat.models.int8.convert import architecture_problem, metadata_problem

    ref = parse_ref(target)
    name = builtin_architecture(ref.value) if ref.kind == "builtin" else None
    if name is not None:
        return architecture_problem(name)
    metadata = leading_metadata(Path(ref.value)) if ref.kind == "gguf" else {}
    if "general.architecture" not in metadata:
        return "an unknown architecture"
    return metadata_problem(metadata)


def require_int8(pair: PairConfig, gguf: bool, device: str) -> None:
    from specchat.models.backend_int8 import int8_support

    where = f"pair '{pair.name}': backend = \"int8\""
    if not gguf:
        raise PairError(f"{where} needs a GGUF target, and {pair.target} is not a .gguf file: "
                        "use backend = \"torch\" or \"auto\"")
    if device != "cpu":
        raise PairError(f"{where} runs on the CPU, not {device}: set device = \"cpu\", or use "
                        "backend = \"auto\"")
    support = int8_support()
    if not support.usable:
        raise PairError(f"{where} cannot run here: {support.why}; use backend = \"llama.cpp\"")
    problem = int8_problem(pair.target)
    if problem and problem != "an unknown architecture":  # an unreadable file fails as it loads
        raise PairError(f"{where} cannot run {pair.target}: {problem}; use backend = "
                        "\"llama.cpp\"")


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
    if is_head_ref(draft):
        return target
    if target == "int8" and (is_gguf(draft) or is_distilled(draft)):
        return "int8"
    return "llama.cpp" if target == "llama.cpp" and is_gguf(draft) else "torch"


def is_distilled(draft: str) -> bool:
    """A `specchat distill` draft (built-in or a folder): int8 runs it from its GGUF form."""
    from pathlib import Path

    from specchat.models.torch_backend.shipped_draft import is_draft_folder

    ref = parse_ref(draft)
    if ref.kind == "builtin":
        return builtin_draft(ref.value.removesuffix(".gguf")) is not None
    return ref.kind == "folder" and is_draft_folder(Path(ref.value))
