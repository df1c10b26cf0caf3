"""Random-weight Llama models with real shapes, for profiling at scale without
downloading anything (`specchat bench synthetic 1b,8b`, the GPU scale measurement of devtools/).

Shapes follow the published configs of Llama 3.2 1B/3B and Llama 3.1 8B; each also has
a tiny stand-in (`tiny=True`: the same roles at toy sizes) so the measuring code runs
end to end on a CPU in seconds. The weights are random (timing does not depend on them),
built on the meta device and materialised on the target device, so an 8B model never
passes through host memory; `layers` may reduce the depth so a CPU can hold and run the
model, which the caller must report. `quantize` swaps the decoder's projections for
bitsandbytes 8-bit or 4-bit layers (CUDA only).
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
TINY_SHAPES = {
    "1b": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
    "3b": dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
    "8b": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3,
               num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
}
TINY_VOCAB = 512
QUANTIZATIONS = ("none", "8bit", "4bit")


def shape(name: str, tiny: bool = False) -> dict:
    shapes = TINY_SHAPES if tiny else SHAPES
    if name not in shapes:
        raise UsageError(f"unknown synthetic model '{name}': choose from {', '.join(shapes)}")
    return dict(shapes[name])


def random_llama(name: str, device: str, dtype: torch.dtype, layers: int | None = None,
                 tiny: bool = False):
    """(a random-weight LlamaForCausalLM of `name`'s shape on `device`, its full layer count)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    dims = shape(name, tiny)
    full_layers = dims["num_hidden_layers"]
    dims["num_hidden_layers"] = min(layers or full_layers, full_layers)
    config = LlamaConfig(vocab_size=TINY_VOCAB if tiny else VOCAB, max_position_embeddings=8192,
                         rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **dims)
    with torch.device("meta"):
        # transformers' decorated `to` hides torch's signature from the type checker
        model = LlamaForCausalLM(config).to(dtype)  # type: ignore[arg-type]
    model = model.to_empty(device=device)
    model.tie_weights()  # to_empty gives tied parameters separate storage
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            parameter.fill_(1.0) if "norm" in parameter_name else parameter.normal_(0, 0.02)
    body = model.get_decoder()
    with torch.device(device):  # its rotary tables were left empty by to_empty
        body.rotary_emb = type(body.rotary_emb)(config)
    return model.eval(), full_layers


def synthetic_model(name: str, device: str, dtype: torch.dtype, layers: int | None = None,
                    tiny: bool = False):
    """(engine adapter, full layer count) for a random model of `name`'s shape."""
    from specchat.models.torch_backend.adapter import adapter_for

    model, full_layers = random_llama(name, device, dtype, layers, tiny)
    return adapter_for(model, device), full_layers


def quantize(model, quantization: str) -> None:
    """Replace every decoder projection by a bitsandbytes int8 or nf4 layer (CUDA only)."""
    if quantization not in QUANTIZATIONS[1:]:
        raise UsageError(f"unknown quantization '{quantization}': choose 8bit or 4bit")
    import bitsandbytes as bnb

    for layer in model.get_decoder().layers:
        for parent in (layer.self_attn, layer.mlp):
            for child_name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, child_name, quantized_linear(bnb, child, quantization))
    torch.cuda.empty_cache()


def quantized_linear(bnb, linear, quantization: str):
    device, weight = linear.weight.device, linear.weight.data.cpu()
    with torch.device("meta"):
        if quantization == "8bit":
            new = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features, bias=False,
                                      has_fp16_weights=False)
        else:
            new = bnb.nn.Linear4bit(linear.in_features, linear.out_features, bias=False,
                                    compute_dtype=torch.bfloat16, quant_type="nf4")
    if quantization == "8bit":
        new.weight = bnb.nn.Int8Params(weight.half(), requires_grad=False, has_fp16_weights=False)
    else:
        new.weight = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4")
    return new.to(device)


def bytes_per_token(model) -> int:
    """Weight bytes one decode step reads: everything but the embedding table (one row),
    which is read whole only when it doubles as the head."""
    tied = model.config.tie_word_embeddings
    return sum(p.numel() * p.element_size() for name, p in model.named_parameters()
               if tied or "embed_tokens" not in name)
