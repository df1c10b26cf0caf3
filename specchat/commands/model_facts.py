"""The models of a pair, sized without loading them, for `pairs --check` (commands/advice.py).

A model llama.cpp runs is sized from its GGUF header (weights in the file's own types,
the KV cache in llama.cpp's f16); a torch model from its safetensors headers or
config.json, in the dtype or quantization the pair loads it in. Sizes are
models/device/estimate.py's; which backend runs each model is models/adapters.py's
choice. Also the draft's expected acceptance, where `specchat distill` recorded it.
A draft head is sized from its file's header, with the target's output rows it multiplies.
Imports no transformers (the models layer does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specchat.sizes import size_text

if TYPE_CHECKING:
    import torch

    from specchat.models.config.pairs import PairConfig


@dataclass(frozen=True)
class ModelFacts:
    """One model of a pair, sized without loading it."""

    role: str
    ref: str
    parameters: int
    weight_bytes: int
    kv_bytes_per_token: int
    source: str
    label: str = ""
    """A GGUF model's size as llama.cpp's stats name it (models/llamacpp/model.size_label:
    the file's own label, "1.5B", else its parameter count), shown for the count; "" elsewhere."""


@dataclass(frozen=True)
class PairFacts:
    """What `pairs --check` knows of a pair before timing anything."""

    header: str
    """"pair NAME on this machine: ..." with the device and how each model computes."""
    device: str
    target: ModelFacts | None
    draft: ModelFacts | None
    context: int
    """Tokens of context the pair budgets by."""
    gguf_placement: str | None
    """Where a GGUF backend computes the target ("llama.cpp decodes on the CPU", "llama.cpp
    computes on CUDA; ...", "the int8 backend computes on the CPU"); None for a torch target."""
    alpha: float | None = None
    alpha_why: str = ""
    why_unknown: str = ""
    """Why the target's size is unknown (target None)."""
    target_backend: str = "torch"
    """"torch", "llama.cpp" or "int8": what computes the target's logits."""


def pair_facts(pair: PairConfig, progress: Callable[[str], None]) -> PairFacts:
    """Sizes, context and the draft's acceptance of `pair` on this machine."""
    from specchat.models.adapters import GGUF_BACKENDS, backend_named, choose_backends
    from specchat.models.config.refs import head_file, parse_ref
    from specchat.models.device.hardware import dtype_name, resolve_device, resolve_dtype

    device, why = resolve_device(pair.device)
    backends = choose_backends(pair, device)
    gguf = backends.target in GGUF_BACKENDS
    if gguf:
        device, why = backend_named(backends.target).device(device, why, backends.gpu)
    dtype, _ = resolve_dtype(pair.dtype, device)
    target, context = target_facts(pair, backends.target, dtype, device, progress)
    if backends.target == "int8":
        kernel = int8_kernel(target.parameters if target is not None else 0, progress)
        computes = f"target on int8 ({kernel}, 8-bit activation rows)"
    elif backends.target == "llama.cpp":
        computes = "target on llama.cpp (the GGUF file's own types)"
    else:
        computes = f"target on torch in {dtype_name(dtype)}"
    if backends.draft is not None:
        computes += f", draft on {backends.draft}"
    header = f"pair {pair.name} on this machine: {device} ({why}); {computes}"
    draft, folder = draft_facts(pair, backends.draft, dtype, progress)
    head = head_file(parse_ref(pair.draft)) if pair.draft else None
    alpha, alpha_why = head_alpha(head) if head is not None else expected_alpha(folder)
    unknown = "" if target is not None else ("an unreadable GGUF header" if gguf
                                             else "no safetensors or config.json")
    return PairFacts(header, device, target, draft, context, why if gguf else None, alpha,
                     alpha_why, unknown, backends.target)


def int8_kernel(parameters: int, progress: Callable[[str], None] = lambda _: None) -> str:
    """The kernel an int8 target of `parameters` (its GGUF header's count, as the load's
    `backend_int8.kernel_parameters`) multiplies with here, as a label names it."""
    from specchat.models.backend_int8 import int8_support, kernel_name

    support = int8_support()
    return kernel_name(support.kernel_for(parameters, progress), support.activation_bits)


def target_facts(pair: PairConfig, backend: str, dtype: torch.dtype, device: str,
                 progress: Callable[[str], None]) -> tuple[ModelFacts | None, int]:
    """(the target's facts, the context the pair budgets by)."""
    from specchat.models.config.refs import parse_ref
    from specchat.models.weights import context_tokens, model_folder

    from specchat.models.adapters import GGUF_BACKENDS

    ref = parse_ref(pair.target)
    if backend in GGUF_BACKENDS:
        return gguf_facts("target", pair.target, ref, progress, int8=backend == "int8")
    folder = model_folder(ref, progress)
    facts = torch_facts("target", pair.target, folder, dtype, pair.quantization)
    return facts, context_tokens(folder, device) if facts is not None else 0


def draft_facts(pair: PairConfig, backend: str | None, dtype: torch.dtype, progress: Callable[[str],
                None]):
    """(the draft model's facts or None, its torch folder or None)."""
    from specchat.models.adapters import GGUF_BACKENDS
    from specchat.models.config.refs import head_file, parse_ref
    from specchat.models.draft_loader import draft_folder

    if pair.draft is None:
        return None, None
    head = head_file(parse_ref(pair.draft))
    if head is not None:
        return head_model_facts(pair.draft, head, backend, dtype), None
    if backend in GGUF_BACKENDS:
        return gguf_facts("draft", pair.draft, parse_ref(pair.draft), progress,
                          int8=backend == "int8")[0], None
    from specchat.models.draft_loader import distill_facts

    folder = draft_folder(pair, progress)
    if folder is None:
        return None, None
    int8 = distill_facts(folder)[1]  # a shipped int8 draft multiplies by 1-byte weights
    quantization = "8bit" if int8 else pair.draft_quantization
    return torch_facts("draft", pair.draft, folder, dtype, quantization), folder


def gguf_facts(role: str, text: str, ref: Any, progress: Callable[[str], None],
               int8: bool = False) -> tuple[ModelFacts | None, int]:
    """(facts of a model llama.cpp runs, from its GGUF header; its context there); `int8`:
    the int8 backend's (`int8_weight_bytes`), whose context is the model's own."""
    from specchat.models.gguf.shape import gguf_shape
    from specchat.models.gguf.drafts import gguf_file
    from specchat.models.device.estimate import size_label
    from specchat.models.llamacpp.model import MAX_CONTEXT

    path = gguf_file(ref, progress)
    shape = gguf_shape(path) if path is not None else None
    if shape is None or path is None:
        return None, 0
    size = shape.size
    stored = (int8_weight_bytes(path, role, size.parameters, progress) if int8
              else size.weight_bytes(0))
    kv = shape.kv_bytes_per_token * 2 if int8 else shape.kv_bytes_per_token  # float32, not f16
    facts = ModelFacts(role, text, size.parameters, stored, kv,
                       size.source, size_label(shape.claimed_label, size.parameters))
    context = shape.context_length or MAX_CONTEXT
    return facts, context if int8 else min(context, MAX_CONTEXT)


def int8_weight_bytes(path: Path, role: str, parameters: int,
                     progress: Callable[[str], None]) -> int:
    """What the int8 backend will hold of the file's weights: a target's on the kernel it gets
    here (`Int8Support.kernel_for`: its Q4_K and Q6_K matrices as tiles on the Q4_K kernel), a
    draft's as int8 rows; a byte a parameter for a file the backend cannot read (loading it
    says why in one line)."""
    from specchat.errors import ModelNotFound
    from specchat.models.backend_int8 import FBGEMM, int8_support
    from specchat.models.int8.model import header_parameter_bytes

    kernel = int8_support().kernel_for(parameters, progress) if role == "target" else FBGEMM
    try:
        return header_parameter_bytes(path, kernel)
    except (ModelNotFound, KeyError):
        return parameters


def torch_facts(role: str, ref: str, folder: Path | str, dtype: torch.dtype,
                quantization: str) -> ModelFacts | None:
    """Facts of a model torch runs, from its folder, in `dtype` or `quantization`."""
    import torch

    from specchat.models.device.estimate import kv_bytes_per_token, model_size

    size = model_size(folder)
    if size is None:
        return None
    element = torch.empty((), dtype=dtype).element_size()
    config_file = Path(folder) / "config.json"
    kv = 0
    if config_file.is_file():
        kv = kv_bytes_per_token(json.loads(config_file.read_text()), element)
    return ModelFacts(role, ref, size.parameters, size.weight_bytes(element, quantization), kv,
                      size.source)


def head_model_facts(ref: str, path: Path, backend: str | None, dtype) -> ModelFacts:
    """A draft head's facts: what a draft step reads is its own weights and the target's output
    rows of its vocabulary (int8 on the int8 backend, `dtype` on torch); its KV cache is one
    layer's."""
    import torch

    from specchat.models.head.files import head_facts
    from specchat.models.head.header import drafted_parameters

    facts = head_facts(path)
    shape = facts.shape
    parameters = drafted_parameters(facts.parameters, facts.vocab, shape.hidden)
    element = 1 if backend == "int8" else torch.empty((), dtype=dtype).element_size()
    kv_element = 4 if backend == "int8" else element
    return ModelFacts("draft", ref, parameters, parameters * element,
                      2 * shape.kv_heads * shape.head_dim * kv_element,
                      f"draft head: its own {facts.parameters / 1e6:.1f} M parameters and "
                      f"{facts.vocab} of the target's output rows")


def facts_line(facts: ModelFacts, context: int) -> str:
    count = facts.label or f"{facts.parameters / 1e6:.1f}M"
    return (f"{facts.role:<6} {facts.ref}: {count} parameters, weights "
            f"{size_text(facts.weight_bytes)}, KV cache {facts.kv_bytes_per_token / 1024:.1f} KiB/token "
            f"({size_text(facts.kv_bytes_per_token * context)} at {context} tokens) [{facts.source}]")


def head_alpha(path: Path) -> tuple[float | None, str]:
    """The per-token acceptance α whose geometric rounds give the τ at k = 4 a head's training
    measured on held-out answers (theory.py's model has one α; a head's falls with depth)."""
    from specchat.engine.theory import expected_tokens_per_round
    from specchat.models.head.files import head_facts

    tau = head_facts(path).info.get("heldout_tau_k4")
    if not tau:
        return None, ""
    low, high = 0.0, 0.999
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if expected_tokens_per_round(middle, 4) < tau else (low, middle)
    return low, f"from the head's held-out τ {tau:.2f} at k = 4"


def expected_alpha(folder: Path | str | None) -> tuple[float | None, str]:
    """The draft's held-out acceptance where `specchat distill` recorded it."""
    if folder is None:
        return None, ""
    from specchat.models.torch_backend.shipped_draft import SPEC_FILE, DraftSpec

    if not (Path(folder) / SPEC_FILE).is_file():
        return None, ""
    rate = DraftSpec.load(Path(folder)).info.get("heldout_acceptance")
    return (float(rate), "the draft's held-out acceptance") if rate else (None, "")
