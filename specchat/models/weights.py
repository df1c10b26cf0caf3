"""One transformers model from its reference: the folder (or cached hub id) transformers
loads it from (a built-in GGUF converted once, a `specchat distill` draft assembled in full,
a local folder, a hub id), and the model and tokenizer in a dtype on a device (spread by a
`Placement`, quantized through bitsandbytes); the EOS ids a model and tokenizer name.

Which backend runs a model is models/adapters.py's choice and the pair's assembly is
models/loader.py's; the torch backend (torch_backend/backend.py) loads through this module.
Every failure a user can cause becomes a one-line `SpecchatError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from specchat import paths
from specchat.errors import ModelNotFound, OutOfMemory, PairError, one_line
from specchat.models.config.folders import folder_problem, is_draft_folder
from specchat.models.config.hub import hub_folder, hub_model_folder
from specchat.models.config.refs import (GGUF_KINDS, ModelRef, builtin_draft, builtin_draft_gguf,
                                         builtin_gguf, gguf_path, parse_ref)
from specchat.models.device.placement import Placement
from specchat.models.gguf import cache as gguf_cache

Progress = Callable[[str], None]


def eos_token_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def model_folder(ref: ModelRef, progress: Progress = lambda _: None) -> Path | str:
    """A folder (or cached hub id) transformers can load `ref` from."""
    if ref.kind == "builtin" and (draft := builtin_draft(ref.value)) is not None:
        return assembled_draft(draft, progress)
    if ref.kind == "builtin" and (draft := builtin_draft_gguf(ref.value)) is not None:
        return assembled_draft(draft, progress)  # same draft on torch
    if ref.kind == "builtin" or ref.kind in GGUF_KINDS:
        return gguf_cache.ensure_converted(gguf_file_of(ref, progress), progress)
    if ref.kind == "folder":
        folder = Path(ref.value)
        if folder.is_dir() and is_draft_folder(folder):
            return assembled_draft(folder, progress)
        problem = folder_problem(folder)
        if problem:
            raise ModelNotFound(problem)
        return folder
    if ref.kind == "hf":
        return hub_model_folder(ref.value, progress)
    return hub_folder(ref.value, progress)


def gguf_file_of(ref: ModelRef, progress: Progress = lambda _: None) -> Path:
    """The GGUF file of a built-in model or a GGUF reference (an unknown built-in name fails)."""
    return gguf_path(ref, progress) or builtin_gguf(ref.value)


def assembled_draft(folder: Path, progress: Progress = lambda _: None) -> Path:
    from specchat.models.torch_backend.shipped_draft import ensure_assembled

    return ensure_assembled(folder, float32_cpu_model, progress)


def float32_cpu_model(reference: str, progress: Progress):
    """(model, tokenizer) of a reference in float32 on the CPU: a shipped draft's target."""
    return load_model(parse_ref(reference), torch.float32, "cpu", "none", progress)


def load_model(ref: ModelRef, dtype: torch.dtype, device: str, quantization: str,
               progress: Progress = lambda _: None, placement: Placement | None = None):
    """(transformers model, tokenizer) for a reference, on `device` in `dtype`; a
    `placement` with a device_map lets accelerate spread the layers instead."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    from specchat.models.torch_backend.safetensors_check import check_safetensors_folder

    folder = model_folder(ref, progress)
    check_safetensors_folder(folder)  # a cut file: one line, not transformers' traceback
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    kwargs = load_kwargs(dtype, device, quantization, placement)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError) as error:
        raise ModelNotFound(f"cannot load model {ref} from {folder}: {one_line(error)}") from None
    except torch.OutOfMemoryError:
        raise OutOfMemory(f"model {ref} does not fit in {device}'s free memory: use "
                          "quantization = \"4bit\", device = \"auto\" or a smaller model") from None
    if "device_map" not in kwargs:
        # transformers' decorated `to` hides torch's signature from the type checker
        model = model.to(device)  # type: ignore[arg-type]
    return model.eval(), tokenizer


def load_kwargs(dtype: torch.dtype, device: str, quantization: str,
                placement: Placement | None) -> dict[str, Any]:
    """`from_pretrained` keywords: dtype, bitsandbytes config, device_map and max_memory."""
    kwargs: dict[str, Any] = {"dtype": dtype}
    spread = placement if placement is not None and placement.device_map is not None else None
    if spread is not None:
        kwargs.update(spread.kwargs())
        if "disk" in (spread.max_memory or {}):
            kwargs["offload_folder"] = str(paths.cache_dir() / "offload")
    if quantization != "none":
        offload = spread is not None and "cpu" in (spread.max_memory or {})
        kwargs["quantization_config"] = bnb_config(quantization, dtype, offload)
        kwargs.setdefault("device_map", device)
    return kwargs


def bnb_config(quantization: str, compute_dtype: torch.dtype, cpu_offload: bool = False):
    """nf4 (4bit) or LLM.int8 (8bit); computing in bfloat16 unless float16 was asked for."""
    from transformers import BitsAndBytesConfig

    compute = torch.float16 if compute_dtype == torch.float16 else torch.bfloat16
    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_enable_fp32_cpu_offload=cpu_offload)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute,
                              bnb_4bit_quant_type="nf4",
                              llm_int8_enable_fp32_cpu_offload=cpu_offload)


def context_tokens(folder: Path | str, device: str) -> int:
    """The context the pair budgets by: the static cache's size on CUDA, the model's elsewhere."""
    from transformers import AutoConfig

    from specchat.models.torch_backend.static import static_length

    config = AutoConfig.from_pretrained(folder)
    if device.startswith("cuda"):
        return static_length(config)
    return int(getattr(config, "max_position_embeddings", 2048) or 2048)
