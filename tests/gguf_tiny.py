"""Tiny random Llama models written as GGUF files (llama architecture, gpt2 byte-level BPE
tokenizer metadata), so llama.cpp and transformers' GGUF loader run on them with no
download. The weights come from tests/tiny.py's models; Q and K rows are permuted into
llama.cpp's rope order as convert_hf_to_gguf.py does. (Named gguf_tiny to stay apart
from any other tiny-GGUF helper; one writer would do.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tiny_gguf import add_tokenizer  # one tokenizer writer for both tiny GGUF builders

NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
         "post_attention_layernorm": "ffn_norm"}


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    shape = rows.shape
    return rows.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def gguf_name(hf_name: str) -> str:
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    _, _, index, *rest = hf_name.split(".")
    return f"blk.{index}.{NAMES['.'.join(rest[:-1])]}.weight"


def tensors(model) -> list[tuple[str, np.ndarray]]:
    config = model.config
    out = []
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # a tied model has no output.weight: llama.cpp reuses token_embd
        array = tensor.detach().float().numpy()
        if name.endswith("q_proj.weight"):
            array = permute(array, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            array = permute(array, config.num_key_value_heads)
        out.append((gguf_name(name), array))
    return out


def add_hparams(writer, config) -> None:
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"])
                              if getattr(config, "rope_parameters", None) else config.rope_theta)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_vocab_size(config.vocab_size)


def write_gguf(model, tokenizer, path: Path, embedding_type: str = "f32", file_type: int = 0,
               size_label: str | None = None) -> Path:
    """`model` (a transformers Llama) with `tokenizer` as a GGUF file; the token
    embeddings may be stored as q8_0, as in many real GGUF files (SmolLM2's included).
    `file_type` and `size_label` are what the metadata claims (the weights stay float32)."""
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny")
    add_hparams(writer, model.config)
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
