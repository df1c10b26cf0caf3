"""Tiny random Llama models written as float32 GGUF files, so the llama.cpp backend runs
in tests with no download: the weights of tests/tiny.py's models under llama.cpp's
tensor names (q and k rows permuted to llama.cpp's rotary layout, as llama.cpp's
own converter does: both are specchat/models/gguf/export.py's), and the tokenizer as GGUF
metadata (byte-level BPE, "gpt2").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from specchat.models.gguf.export import llama_cpp_name, rope_heads, rope_row_order


def write_gguf(model, tokenizer, path: Path, architecture: str = "llama",
               rope_scaling_type: str | None = None, rope_dimension_count: int | None = None,
               extra: Sequence[tuple[str, Any]] = (), quantized: dict[str, Any] | None = None) -> Path:
    """`model` (a transformers Llama or Qwen2) and `tokenizer` as one float32 GGUF file at
    `path`, with `extra` (name, array) tensors after the model's; the rope keys can claim other
    ropes than the weights' (for checks that read the header). A tensor named in `quantized`
    is written as its (raw rows, GGML type) instead (the model's weights must be their values)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny-random-llama")
    add_hyperparameters(writer, model.config, rope_dimension_count)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if rope_scaling_type is not None:
        writer.add_rope_scaling_type(gguf.RopeScalingType(rope_scaling_type))
    add_tokenizer(writer, tokenizer)
    for name, weight in [*tensors(model), *extra]:
        if quantized and name in quantized:
            rows, kind = quantized[name]
            writer.add_tensor(name, rows, raw_dtype=kind)
        else:
            writer.add_tensor(name, weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def add_hyperparameters(writer, config, rope_dimension_count: int | None = None) -> None:
    """The model's shape as GGUF metadata (its name and file type are the caller's)."""
    head_dim = config.hidden_size // config.num_attention_heads
    rope = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(rope))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(rope_dimension_count or head_dim)
    writer.add_vocab_size(config.vocab_size)


def add_tokenizer(writer, tokenizer) -> None:
    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    special = set(tokenizer.all_special_tokens)
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if token in special else 1 for token in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_add_bos_token(False)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)


def tensors(model):
    """(llama.cpp name, float32 array) for every weight of a transformers Llama or Qwen2.
    Q and K rows are permuted into llama.cpp's rope order for a llama (qwen2's rope is
    NEOX-style: llama.cpp's converter permutes nothing); a tied output matrix is left out
    (llama.cpp reuses token_embd)."""
    config = model.config
    heads = {"head_count": config.num_attention_heads,
             "head_count_kv": config.num_key_value_heads}
    for name, weight in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        array = weight.detach().float().numpy()
        count = rope_heads(name, heads) if config.model_type == "llama" else None
        if count:
            array = array[rope_row_order(array.shape[0], count)]
        yield llama_cpp_name(name, config.num_hidden_layers, config.model_type), array


def save_tiny_gguf(folder: Path, tokenizer, layers: int = 2, hidden: int = 64, seed: int = 1,
                   name: str = "tiny.gguf"):
    """(path of a tiny random Llama GGUF, the transformers model it holds)."""
    from tiny import build_model

    model = build_model(len(tokenizer), layers, hidden, seed,
                        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    folder.mkdir(parents=True, exist_ok=True)
    return write_gguf(model, tokenizer, folder / name), model


def build_qwen2(vocab_size: int, layers: int = 2, hidden: int = 64, seed: int = 3,
                eos_token_id: int = 2, tied: bool = True):
    """A tiny random Qwen2 (q/k/v biases, rope on the head's two halves, tied embeddings)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=eos_token_id,
                         bos_token_id=0, tie_word_embeddings=tied, initializer_range=0.3,
                         rope_theta=10000.0)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # random biases, so a bias that is dropped or misplaced shows
        for layer in model.model.layers:
            for name in ("q_proj", "k_proj", "v_proj"):
                layer.self_attn.get_submodule(name).bias.normal_(0, 0.3)
    return model


def write_qwen2_gguf(model, tokenizer, path: Path) -> Path:
    """A transformers Qwen2 and its tokenizer as one float32 GGUF file of architecture qwen2."""
    return write_gguf(model, tokenizer, path, architecture="qwen2")


def write_llama3_gguf(model, tokenizer, path: Path) -> Path:
    """A transformers Llama with llama 3's rope scaling as a GGUF file: the weights of
    `write_gguf`, and its frequency factors as `rope_freqs.weight` (what llama.cpp's
    converter writes: the default inverse frequencies over llama 3's)."""
    import torch

    head_dim = model.config.hidden_size // model.config.num_attention_heads
    base = model.config.rope_parameters["rope_theta"]
    default = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    factors = (default / model.model.rotary_emb.inv_freq.double()).float()
    return write_gguf(model, tokenizer, path, extra=[("rope_freqs.weight", factors.numpy())])


def build_llama3(vocab_size: int, seed: int = 4, eos_token_id: int = 2):
    """A tiny random Llama with llama 3's rope scaling (every frequency band in play)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=eos_token_id,
                         initializer_range=0.3, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0,
                                          "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 16})
    return LlamaForCausalLM(config).eval()


def q4k_rows(weight) -> Any:
    """A float matrix [out, in] (in a multiple of 256) as Q4_K rows [out, in / 256 * 144], as
    a plain version of llama.cpp's quantizer makes them: per 32 inputs a 4-bit range from
    the minimum to the maximum, its scale and minimum as 6-bit fractions of the super-block's
    two float16 scales."""
    import numpy as np

    rows, inputs = weight.shape
    w = np.asarray(weight, dtype=np.float32).reshape(rows, inputs // 256, 8, 32)
    low = np.minimum(w.min(-1), 0.0)
    step = np.maximum((w.max(-1) - low) / 15.0, 1e-8)
    d = (step.max(-1) / 63.0).astype(np.float16)
    dmin = (-low.min(-1) / 63.0).astype(np.float16)
    sc = np.clip(np.round(step / np.maximum(d.astype(np.float32), 1e-12)[..., None]), 1, 63).astype(np.uint8)
    mn = np.clip(np.round(-low / np.maximum(dmin.astype(np.float32), 1e-12)[..., None]), 0, 63).astype(np.uint8)
    unit = d.astype(np.float32)[..., None] * sc
    offset = dmin.astype(np.float32)[..., None] * mn
    q = np.clip(np.round((w + offset[..., None]) / unit[..., None]), 0, 15).astype(np.uint8)
    packed = np.zeros((rows, inputs // 256, 12), np.uint8)
    packed[..., 0:4] = (sc[..., :4] & 63) | ((sc[..., 4:] >> 4) << 6)
    packed[..., 4:8] = (mn[..., :4] & 63) | ((mn[..., 4:] >> 4) << 6)
    packed[..., 8:12] = (sc[..., 4:] & 15) | ((mn[..., 4:] & 15) << 4)
    nibbles = q.reshape(rows, inputs // 256, 4, 2, 32)
    qs = (nibbles[..., 0, :] | (nibbles[..., 1, :] << 4)).reshape(rows, inputs // 256, 128)
    blocks = np.concatenate([d[..., None].view(np.uint8), dmin[..., None].view(np.uint8), packed, qs],
                            axis=-1)
    return blocks.reshape(rows, -1)


def write_q4k_qwen2_gguf(tokenizer, path: Path, hidden: int = 256, seed: int = 5):
    """(path, model): a tiny Qwen2 in a Q4_K_M file's types: its attention and gate/up
    matrices Q4_K rows (`q4k_rows`), its down matrices and its own output matrix random Q6_K
    rows (q4k.example_rows), each holding exactly its rows' values (gguf's de-quantizer);
    norms and embeddings float32. Its Q4_K and Q6_K matrices are what the tiled kernels
    multiply."""
    import torch
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    from specchat.models.int8.q4k import example_rows

    model = build_qwen2(len(tokenizer), hidden=hidden, seed=seed, tied=False,
                        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    layers = model.config.num_hidden_layers
    raw: dict[str, Any] = {}
    with torch.no_grad():
        for index, (name, module) in enumerate(model.named_modules()):
            if not isinstance(module, torch.nn.Linear):
                continue
            if name.endswith("down_proj") or name == "lm_head":
                rows, values = example_rows(*module.weight.shape, seed=seed + index,
                                            largest_scale=2e-4, bits=6)
                kind = GGMLQuantizationType.Q6_K
            elif name.startswith("model.layers."):
                rows = q4k_rows(module.weight.numpy())
                kind = GGMLQuantizationType.Q4_K
                values = torch.from_numpy(dequantize(rows, kind).reshape(module.weight.shape).copy())
            else:
                continue
            module.weight.copy_(values)
            raw[llama_cpp_name(f"{name}.weight", layers, "qwen2")] = (rows, kind)
    return write_gguf(model, tokenizer, path, architecture="qwen2", quantized=raw), model
