"""Random-weight Llama models with real shapes, for profiling at scale without
downloading anything (`specchat bench synthetic 1b,8b`).

Shapes follow the published configs of Llama 3.2 1B/3B and Llama 3.1 8B. The
weights are random (timing does not depend on them); `layers` may reduce the
depth so a CPU can hold and run the model, which the caller must report.
"""

from __future__ import annotations

import torch

from specchat.errors import UsageError

SHAPES = {
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True),
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
               num_attention_heads=24, num_key_value_heads=8, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
}
VOCAB = 128256


def shape(name: str) -> dict:
    if name not in SHAPES:
        raise UsageError(f"unknown synthetic model '{name}': choose from {', '.join(SHAPES)}")
    return dict(SHAPES[name])


def synthetic_model(name: str, device: str, dtype: torch.dtype, layers: int | None = None):
    """(engine adapter, full layer count) for a random model of `name`'s shape."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specchat.models.torch_backend.adapter import adapter_for

    dims = shape(name)
    full_layers = dims["num_hidden_layers"]
    dims["num_hidden_layers"] = min(layers or full_layers, full_layers)
    config = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=8192, rope_theta=500000.0,
                         **dims)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(previous)
    return adapter_for(model, device), full_layers
