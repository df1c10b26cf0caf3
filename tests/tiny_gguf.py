"""Tiny random Llama models written as float32 GGUF files, so the llama.cpp backend runs
in tests with no download: the weights of tests/tiny.py's models under llama.cpp's
tensor names (q and k rows permuted to llama.cpp's rotary layout, as llama.cpp's
own converter does), and the tokenizer as GGUF metadata (byte-level BPE, "gpt2").
"""

from __future__ import annotations

import json
from pathlib import Path

LAYER_TENSORS = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def rotary_permute(weight, heads: int):
    """HF's half-split rotary rows -> llama.cpp's interleaved pairs (convert_hf_to_gguf)."""
    rows = weight.shape[0]
    return (weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def write_gguf(model, tokenizer, path: Path, architecture: str = "llama",
               rope_scaling_type: str | None = None, rope_dimension_count: int | None = None) -> Path:
    """`model` (a transformers Llama) and `tokenizer` as one float32 GGUF file at `path`;
    the rope keys claim other ropes than the weights' (for checks that read the header)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    add_hyperparameters(writer, model.config, rope_dimension_count)
    if rope_scaling_type is not None:
        writer.add_rope_scaling_type(gguf.RopeScalingType(rope_scaling_type))
    add_tokenizer(writer, tokenizer)
    for name, weight in tensors(model):
        writer.add_tensor(name, weight.detach().float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def add_hyperparameters(writer, config, rope_dimension_count: int | None = None) -> None:
    import gguf

    head_dim = config.hidden_size // config.num_attention_heads
    rope = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    writer.add_name("tiny-random-llama")
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
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


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
    """(llama.cpp name, tensor) for every weight of a transformers Llama."""
    config, state = model.config, model.state_dict()
    yield "token_embd.weight", state["model.embed_tokens.weight"]
    for i in range(config.num_hidden_layers):
        for short, long in LAYER_TENSORS.items():
            weight = state[f"model.layers.{i}.{long}.weight"]
            if short == "attn_q":
                weight = rotary_permute(weight, config.num_attention_heads)
            elif short == "attn_k":
                weight = rotary_permute(weight, config.num_key_value_heads)
            yield f"blk.{i}.{short}.weight", weight
    yield "output_norm.weight", state["model.norm.weight"]
    yield "output.weight", state["lm_head.weight"]


def save_tiny_gguf(folder: Path, tokenizer, layers: int = 2, hidden: int = 64, seed: int = 1,
                   name: str = "tiny.gguf"):
    """(path of a tiny random Llama GGUF, the transformers model it holds)."""
    from tiny import build_model

    model = build_model(len(tokenizer), layers, hidden, seed,
                        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    folder.mkdir(parents=True, exist_ok=True)
    return write_gguf(model, tokenizer, folder / name), model


QWEN2_BIASES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                "attn_v": "self_attn.v_proj"}


def build_qwen2(vocab_size: int, layers: int = 2, hidden: int = 64, seed: int = 3,
                eos_token_id: int = 2):
    """A tiny random Qwen2 (q/k/v biases, rope on the head's two halves, tied embeddings)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=eos_token_id,
                         bos_token_id=0, tie_word_embeddings=True, initializer_range=0.3,
                         rope_theta=10000.0)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # random biases, so a bias that is dropped or misplaced shows
        for layer in model.model.layers:
            for name in QWEN2_BIASES.values():
                layer.get_submodule(name).bias.normal_(0, 0.3)
    return model


def qwen2_tensors(model):
    """(llama.cpp name, tensor) for every weight of a transformers Qwen2: rows as they are
    (qwen2's rope is NEOX-style, so llama.cpp's converter permutes nothing), q/k/v biases,
    and no output matrix where the embeddings are tied."""
    config, state = model.config, model.state_dict()
    yield "token_embd.weight", state["model.embed_tokens.weight"]
    for i in range(config.num_hidden_layers):
        for short, long in LAYER_TENSORS.items():
            yield f"blk.{i}.{short}.weight", state[f"model.layers.{i}.{long}.weight"]
        for short, long in QWEN2_BIASES.items():
            yield f"blk.{i}.{short}.bias", state[f"model.layers.{i}.{long}.bias"]
    yield "output_norm.weight", state["model.norm.weight"]


def write_qwen2_gguf(model, tokenizer, path: Path) -> Path:
    """A transformers Qwen2 and its tokenizer as one float32 GGUF file of architecture qwen2."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen2")
    add_hyperparameters(writer, model.config)
    add_tokenizer(writer, tokenizer)
    for name, weight in qwen2_tensors(model):
        writer.add_tensor(name, weight.detach().float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_llama3_gguf(model, tokenizer, path: Path) -> Path:
    """A transformers Llama with llama 3's rope scaling as a GGUF file: the weights of
    `write_gguf`, and its frequency factors as `rope_freqs.weight` (what llama.cpp's
    converter writes: the default inverse frequencies over llama 3's)."""
    import gguf
    import torch

    rotary = model.model.rotary_emb
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    base = model.config.rope_parameters["rope_theta"]
    default = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    writer = gguf.GGUFWriter(str(path), "llama")
    add_hyperparameters(writer, model.config)
    add_tokenizer(writer, tokenizer)
    for name, weight in tensors(model):
        writer.add_tensor(name, weight.detach().float().contiguous().numpy())
    factors = (default / rotary.inv_freq.double()).float()
    writer.add_tensor("rope_freqs.weight", factors.numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


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

