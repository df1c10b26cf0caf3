"""Tiny random Llama models written as GGUF files (llama architecture, gpt2 byte-level BPE
tokenizer metadata), with the stored types and labels a test asks for, so llama.cpp and
transformers' GGUF loader run on them with no download; and `specchat distill`-format drafts
of them. The weights, their llama.cpp names and rope order, the shape and the tokenizer are
tests/tiny_gguf.py's (whose names and order are specchat/models/gguf/export.py's).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tiny_gguf import add_hyperparameters, add_tokenizer, tensors


def write_gguf(model, tokenizer, path: Path, embedding_type: str = "f32", file_type: int = 0,
               size_label: str | None = None) -> Path:
    """`model` (a transformers Llama) with `tokenizer` as a GGUF file; the token
    embeddings may be stored as q8_0, as in many real GGUF files (SmolLM2's included).
    `file_type` and `size_label` are what the metadata claims (the weights stay float32)."""
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny")
    add_hyperparameters(writer, model.config)
    add_tokenizer(writer, tokenizer)
    writer.add_file_type(file_type)
    if size_label is not None:
        writer.add_size_label(size_label)
    for name, array in tensors(model):
        if name == "token_embd.weight" and embedding_type == "q8_0":
            quantized = gguf.quants.quantize(array, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_gguf(folder: Path, layers: int = 2, hidden: int = 64, seed: int = 1,
                    embedding_type: str = "f32", tied: bool = False, **metadata) -> Path:
    """A tiny random Llama with tests/tiny.py's tokenizer, as folder/tiny.gguf; `tied`:
    one matrix for embeddings and output, as SmolLM2 has."""
    from tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), layers, hidden, seed,
                        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
        model.config.tie_word_embeddings = True
    folder.mkdir(parents=True, exist_ok=True)
    return write_gguf(model, tokenizer, folder / "tiny.gguf", embedding_type, **metadata)


def write_tiny_draft(target: Path, folder: Path, int8: bool = True, vocab_every: int = 2) -> Path:
    """A `specchat distill`-format draft of the GGUF `target`: its first and last layers,
    nudged off the target's weights, int8, proposing from every `vocab_every`-th token
    (plus the end-of-turn token); 0 keeps the full vocabulary."""
    import torch

    from specchat.distill.draft import pick_layers, save_shipped
    from specchat.models.torch_backend.shipped_draft import DraftSpec, build_draft
    from specchat.models.weights import load_model
    from specchat.models.config.refs import parse_ref

    model, tokenizer = load_model(parse_ref(str(target)), torch.float32, "cpu", "none")
    layers = pick_layers(model.config.num_hidden_layers, 2)
    draft = build_draft(model, layers)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, weight in draft.model.layers.named_parameters():
            weight.add_(0.02 * torch.randn(weight.shape, generator=generator))
    size = model.config.vocab_size
    vocab = (sorted(set(range(0, size, vocab_every)) | {tokenizer.eos_token_id})
             if vocab_every else None)
    save_shipped(draft, DraftSpec(str(target), layers, vocab, {"weights": "int8" if int8
                                                                   else "bfloat16"}),
                 folder, int8=int8)
    return folder


def tiny_gguf_with_draft(root: Path, layers: int = 2, int8: bool = True) -> tuple[Path, Path]:
    """(a tiny GGUF target, a `specchat distill`-format draft of it with the full
    vocabulary), built under `root` with a model cache of their own."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECCHAT_CACHE_DIR", str(root / "cache"))
        target = write_tiny_gguf(root / "target", layers=layers)
        return target, write_tiny_draft(target, root / "draft", int8=int8, vocab_every=0)
