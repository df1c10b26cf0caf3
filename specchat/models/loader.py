"""Loading a pair from its `PairConfig`: target, drafter, tokenizer, dtype, device.

The only place (with its sibling modules) that imports transformers. Every
failure a user can cause (missing file, uncached hub id, vocabulary mismatch,
quantization without CUDA) becomes a one-line `SpecchatError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from specchat.engine import ModelDrafter, NgramDrafter
from specchat.errors import ModelNotFound, PairError
from specchat.models import gguf_cache
from specchat.models.config import PairConfig
from specchat.models.hardware import dtype_name, resolve_device, resolve_dtype
from specchat.models.hf import HFCausalModel
from specchat.models.refs import (ModelRef, builtin_draft, builtin_draft_gguf, builtin_gguf,
                                  hub_reachable, hub_snapshot, parse_ref)
from specchat.models.static import adapter_for

Progress = Callable[[str], None]


@dataclass
class LoadedPair:
    """Everything the chat layer needs to decode with a pair."""

    config: PairConfig
    target: HFCausalModel
    drafter: ModelDrafter | NgramDrafter | None
    tokenizer: Any
    device: str
    dtype: str
    reasons: dict[str, str] = field(default_factory=dict)
    """Why the device and dtype were chosen."""
    load_s: float = 0.0

    @property
    def eos_ids(self) -> set[int]:
        return eos_token_ids(self.target.model, self.tokenizer)

    @property
    def draft_model(self) -> HFCausalModel | None:
        return getattr(self.drafter, "model", None)

    @property
    def memory_bytes(self) -> int:
        draft = self.draft_model
        return self.target.parameter_bytes + (draft.parameter_bytes if draft else 0)

    @property
    def context_length(self) -> int:
        return int(getattr(self.target.config, "max_position_embeddings", 2048) or 2048)


def eos_token_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def load_pair(pair: PairConfig, dtype: str | None = None,
              progress: Progress = lambda _: None) -> LoadedPair:
    """Load the target and drafter of `pair`; `dtype` overrides the pair's."""
    started = time.perf_counter()
    device, device_why = resolve_device(pair.device)
    torch_dtype, dtype_why = resolve_dtype(dtype or pair.dtype, device)
    check_quantization(pair, device)
    progress(f"loading target {pair.target}")
    target_model, tokenizer = load_model(parse_ref(pair.target), torch_dtype, device,
                                         pair.quantization, progress)
    drafter = None
    if pair.draft:
        drafter = load_drafter(pair, torch_dtype, device, tokenizer, progress)
    target = adapter_for(target_model, device, shared_vocab_size(target_model, drafter),
                         quantized=pair.quantization != "none")
    if isinstance(drafter, ModelDrafter):
        drafter.model.vocab_size = target.vocab_size
    return LoadedPair(pair, target, drafter, tokenizer, device, dtype_name(torch_dtype),
                      {"device": device_why, "dtype": dtype_why}, time.perf_counter() - started)


def load_drafter(pair: PairConfig, dtype, device, target_tokenizer, progress: Progress):
    ref = parse_ref(pair.draft)
    if ref.kind == "ngram":
        return NgramDrafter(max_ngram=pair.ngram_n, min_ngram=min(2, pair.ngram_n))
    progress(f"loading draft {pair.draft}")
    model, tokenizer = load_model(ref, dtype, device, "none", progress)
    check_same_vocabulary(pair, target_tokenizer, tokenizer)
    vocab, int8 = distill_facts(model_folder(ref, progress))
    return ModelDrafter(adapter_for(model, device, head_ids=vocab, int8=int8))


def distill_facts(folder: Path | str) -> tuple[list[int] | None, bool]:
    """A `specchat distill` draft's reduced vocabulary and whether it shipped as int8
    (then it is multiplied by its int8 weights); (None, False) for any other model."""
    from specchat.models.distill.draft import SPEC_FILE, DraftSpec

    if not (Path(folder) / SPEC_FILE).is_file():
        return None, False
    spec = DraftSpec.load(Path(folder))
    return spec.vocab, spec.info.get("weights") == "int8"


def shared_vocab_size(target_model, drafter) -> int:
    """Logit columns both models share (their heads may be padded differently)."""
    size = target_model.get_output_embeddings().weight.shape[0]
    if isinstance(drafter, ModelDrafter):
        size = min(size, drafter.model.vocab_size)
    return size


def check_same_vocabulary(pair: PairConfig, target_tokenizer, draft_tokenizer) -> None:
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        raise PairError(
            f"pair '{pair.name}': draft {pair.draft} and target {pair.target} use different "
            f"vocabularies ({len(draft_tokenizer)} vs {len(target_tokenizer)} tokens): "
            "pick a draft from the target's model family")


def check_quantization(pair: PairConfig, device: str) -> None:
    if pair.quantization == "none":
        return
    if not device.startswith("cuda"):
        raise PairError(f"pair '{pair.name}': quantization = \"{pair.quantization}\" needs a CUDA GPU "
                        "(bitsandbytes); set quantization = \"none\" to run on this machine")
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise PairError(f"pair '{pair.name}': quantization = \"{pair.quantization}\" needs bitsandbytes: "
                        "pip install 'specchat[bitsandbytes]'")


def model_folder(ref: ModelRef, progress: Progress = lambda _: None) -> Path | str:
    """A folder (or cached hub id) transformers can load `ref` from."""
    if ref.kind == "builtin" and builtin_draft(ref.value) is not None:
        return assembled_draft(builtin_draft(ref.value), progress)
    if ref.kind == "builtin" and builtin_draft_gguf(ref.value) is not None:
        return assembled_draft(builtin_draft_gguf(ref.value), progress)  # same draft on torch
    if ref.kind == "builtin":
        return gguf_cache.ensure_converted(builtin_gguf(ref.value), progress)
    if ref.kind == "gguf":
        path = Path(ref.value)
        if not path.is_file():
            raise ModelNotFound(f"GGUF file {path} does not exist: check the path in models.toml")
        return gguf_cache.ensure_converted(path, progress)
    if ref.kind == "folder":
        if not Path(ref.value).is_dir():
            raise ModelNotFound(f"model folder {ref.value} does not exist: check the path in models.toml")
        if is_shipped_draft(Path(ref.value)):
            return assembled_draft(Path(ref.value), progress)
        if not (Path(ref.value) / "config.json").is_file():
            raise ModelNotFound(f"model folder {ref.value} has no config.json: "
                                "point to a folder saved with save_pretrained")
        return Path(ref.value)
    return hub_folder(ref.value, progress)


def is_shipped_draft(folder: Path) -> bool:
    """A `specchat distill` output: own weights + spec, no full model of its own."""
    return (folder / "specchat-draft.json").is_file() and not (folder / "config.json").is_file()


def assembled_draft(folder: Path, progress: Progress) -> Path:
    from specchat.models.distill.assemble import ensure_assembled

    return ensure_assembled(folder, progress)


def hub_folder(repo_id: str, progress: Progress) -> Path:
    snapshot = hub_snapshot(repo_id)
    if snapshot is not None:
        return snapshot
    if not hub_reachable():
        raise ModelNotFound(f"model '{repo_id}' is not in the local Hugging Face cache and the hub "
                            "is unreachable: download it where there is network, or use a local "
                            "folder or .gguf file")
    progress(f"downloading {repo_id}")
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id))


def load_model(ref: ModelRef, dtype: torch.dtype, device: str, quantization: str,
               progress: Progress = lambda _: None):
    """(transformers model, tokenizer) for a reference, on `device` in `dtype`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    folder = model_folder(ref, progress)
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    kwargs: dict[str, Any] = {"dtype": dtype}
    if quantization != "none":
        kwargs.update(quantization_config=bnb_config(quantization, dtype), device_map=device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError) as error:
        raise ModelNotFound(f"cannot load model {ref} from {folder}: {first_line(error)}") from None
    if quantization == "none":
        model = model.to(device)
    return model.eval(), tokenizer


def bnb_config(quantization: str, compute_dtype: torch.dtype):
    from transformers import BitsAndBytesConfig

    if quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute_dtype,
                              bnb_4bit_quant_type="nf4")


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
