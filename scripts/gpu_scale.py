"""Real-scale measurements for issues 13 and 14 on a GPU: random weights with the real
shapes of Llama-3.2-1B and Llama-3.1-8B (nothing downloaded), in bfloat16, 8-bit and
4-bit (bitsandbytes). One JSON object per measurement, appended to --out:

- copy: a device-to-device copy's bandwidth (bytes read + written per second), the
  ceiling the decode bandwidth is compared with;
- model: per shape and quantization, weight bytes and GPU memory, the adapter used
  (specchat's own static forward; CUDA graph capture time, or why capture failed),
  step time and verify cost v(n) for n = 1..16, and target-only decode bandwidth
  (weight bytes read per token / time per token) as a share of the copy's;
- spec: the 8B target decoding alone, with a self-draft sharing its weights (α = 1:
  bounds the engine's overhead) and with the 1B draft (random weights: α ≈ 0, its
  cost alone), each next to what the cost model (theory.ideal_speedup) predicts from
  the measured c and v, plus the prediction at α = 0.6, 0.7, 0.8;
- syncs: host synchronisations per round of speculative decoding (CUDA's sync debug
  mode counts them; the design allows one).

`--device cpu --tiny` runs every part with tiny shapes on the CPU (a dry run of the
plumbing: quantization is skipped there, it needs CUDA). Measurements fail one at a
time: an error is recorded in its object and the rest go on.

usage: python3 scripts/gpu_scale.py --out results.jsonl [--device cuda] [--tiny]
       [--shapes 1b,8b] [--quant none,8bit,4bit] [--budget-s 500]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specchat.bench.profile import median_seconds, verify_costs  # noqa: E402
from specchat.engine import Decoder, Finished, ModelDrafter, SamplingParams, Settings  # noqa: E402
from specchat.theory import ideal_speedup  # noqa: E402

TINY = {"1b": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
        "8b": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)}
TINY_VOCAB = 512
WIDTHS = tuple(range(1, 17))
ALPHAS = (0.6, 0.7, 0.8)


class Run:
    """Where results go, what device they are from, and the time left."""

    def __init__(self, args):
        self.args, self.device = args, args.device
        self.started = time.perf_counter()
        self.out = open(args.out, "a")
        self.name = device_name(args.device)

    def left(self) -> float:
        return self.args.budget_s - (time.perf_counter() - self.started)

    def emit(self, kind: str, **figures) -> None:
        record = {"kind": kind, "device": self.name, "command": " ".join(sys.argv), **figures}
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()
        print(json.dumps(record)[:400], flush=True)

    def guarded(self, kind: str, function, **labels):
        """Run one measurement; record its error instead of stopping the run."""
        if self.left() < 15:
            self.emit(kind, skipped="time budget spent", **labels)
            return None
        try:
            return function()
        except Exception as error:  # one failed measurement costs only itself
            self.emit(kind, error=f"{type(error).__name__}: {error}"[:500],
                      trace=traceback.format_exc()[-1500:], **labels)
            return None


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return f"cpu ({platform.processor() or platform.machine()})"


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def copy_bandwidth(device: str, nbytes: int) -> float:
    """Bytes read + written per second by a device-to-device copy (median of 20)."""
    source = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    target = torch.empty_like(source)
    seconds = median_seconds(lambda: target.copy_(source), 20, torch.device(device))
    return 2 * nbytes / seconds


def random_llama(shape: str, device: str, tiny: bool):
    """A random-weight Llama of `shape`'s real dimensions, built on `device` in bfloat16."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specchat.models.torch_backend.synthetic import VOCAB
    from specchat.models.torch_backend.synthetic import shape as real_shape

    dims = TINY[shape] if tiny else real_shape(shape)
    config = LlamaConfig(vocab_size=TINY_VOCAB if tiny else VOCAB, max_position_embeddings=8192,
                         rope_theta=500000.0, **dims)
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model = model.to_empty(device=device)
    for name, parameter in model.named_parameters():
        with torch.no_grad():
            parameter.fill_(1.0) if "norm" in name else parameter.normal_(0, 0.02)
    body = model.get_decoder()
    with torch.device(device):  # its tables were left empty by to_empty
        body.rotary_emb = type(body.rotary_emb)(config)
    return model.eval()


def quantize(model, quant: str) -> None:
    """Replace every decoder projection by a bitsandbytes int8 or nf4 layer (CUDA only)."""
    import bitsandbytes as bnb

    for layer in model.get_decoder().layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, quantized_linear(bnb, child, quant))
    torch.cuda.empty_cache()


def quantized_linear(bnb, linear, quant: str):
    device, weight = linear.weight.device, linear.weight.data.cpu()
    with torch.device("meta"):
        if quant == "8bit":
            new = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features, bias=False,
                                      has_fp16_weights=False)
        else:
            new = bnb.nn.Linear4bit(linear.in_features, linear.out_features, bias=False,
                                    compute_dtype=torch.bfloat16, quant_type="nf4")
    if quant == "8bit":
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


def own_adapter(model, buckets: bool):
    """specchat's own static forward; on CUDA its steps are captured as CUDA graphs."""
    from specchat.models.torch_backend.static_llama import StaticLlama

    return StaticLlama(model, max_length=1024, buckets=buckets)


def measure_model(run: Run, shape: str, quant: str):
    """Build one model, time its steps, record everything; returns (model, figures)."""
    before = torch.cuda.memory_allocated() if run.device.startswith("cuda") else 0
    started = time.perf_counter()
    model = random_llama(shape, run.device, run.args.tiny)
    if quant != "none":
        quantize(model, quant)
    built_s = time.perf_counter() - started
    memory = (torch.cuda.memory_allocated() - before) if run.device.startswith("cuda") else None
    adapter = own_adapter(model, buckets=False)
    started = time.perf_counter()
    adapter.prepare(widths=max(WIDTHS))  # on CUDA: every width captured here, timed in capture_s
    context = [(1000 + i) % adapter.vocab_size for i in range(256)]
    costs = verify_costs(adapter, context, WIDTHS, repeats=run.args.repeats)
    figures = {"shape": shape, "quant": quant, "tiny": run.args.tiny,
               "layers": model.config.num_hidden_layers, "weight_bytes_per_token": bytes_per_token(model),
               "gpu_memory_bytes": memory, "build_s": round(built_s, 2),
               "measure_s": round(time.perf_counter() - started, 2),
               "captured": bool(adapter.compiled), "capture_s": round(adapter.capture_s, 3),
               "compile_error": adapter.compile_error,
               "step_ms": costs[1] * 1000, "verify_ms": {n: s * 1000 for n, s in costs.items()},
               "v": {n: s / costs[1] for n, s in costs.items()}}
    figures["bandwidth_bytes_per_s"] = figures["weight_bytes_per_token"] / costs[1]
    return model, figures


def decode_rate(target, drafter, k: int, prompt: list[int], tokens: int):
    """(tokens/s, acceptance rate, rounds) of one greedy answer, after a warm-up answer."""
    decoder = Decoder(target, drafter, eos_ids=set(), check_invariants=False)
    settings = Settings(k, SamplingParams())
    list(decoder.generate(prompt, settings, 16))
    sync(str(target.device))
    started = time.perf_counter()
    rounds = [e for e in decoder.generate(prompt, settings, tokens) if not isinstance(e, Finished)]
    sync(str(target.device))
    seconds = time.perf_counter() - started
    drafted = sum(r.drafted for r in rounds)
    accepted = sum(len(r.accepted) for r in rounds)
    return sum(len(r.committed) for r in rounds) / seconds, accepted / drafted if drafted else None, len(rounds)


def count_syncs(target, drafter, k: int, prompt: list[int], rounds: int = 8) -> float | None:
    """Host synchronisations per round, counted by CUDA's sync debug mode (None off CUDA)."""
    if target.device.type != "cuda":
        return None
    decoder = Decoder(target, drafter, eos_ids=set(), check_invariants=False)
    events = decoder.generate(prompt, Settings(k, SamplingParams()), 10_000)
    next(events)  # the prompt's round, outside the count
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(rounds):
                next(events)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught) / rounds


def speculative_runs(run: Run, target_model, draft_model, target_fig: dict, draft_fig: dict | None):
    """Target-only, self-draft (α = 1) and the 1B draft, each beside the cost model."""
    k, tokens = run.args.k, run.args.tokens
    target = own_adapter(target_model, buckets=True)
    prompt = [(7 * i + 3) % target.vocab_size for i in range(128)]
    alone = decode_rate(target, None, 0, prompt, tokens)[0]
    v = target_fig["v"][k + 1]
    self_rate, self_alpha, _ = decode_rate(target, ModelDrafter(own_adapter(target_model, True)),
                                           k, prompt, tokens)
    run.emit("spec", target=target_fig["shape"], draft="self (shares the target's weights)", k=k,
             target_only_tok_s=alone, spec_tok_s=self_rate, measured_speedup=self_rate / alone,
             alpha=self_alpha, c=1.0, v=v, predicted_speedup=ideal_speedup(min(self_alpha or 0, 0.999999), k, 1.0, v))
    if draft_fig is None:
        return
    c = draft_fig["step_ms"] / target_fig["step_ms"]
    drafter = ModelDrafter(own_adapter(draft_model, True))
    rate, alpha, _ = decode_rate(target, drafter, k, prompt, tokens)
    predicted = {str(a): ideal_speedup(a, kk, c, target_fig["v"][kk + 1])
                 for a in ALPHAS for kk in (k,)}
    best = {str(a): max(range(1, 9), key=lambda kk: ideal_speedup(a, kk, c, target_fig["v"][kk + 1]))
            for a in ALPHAS}
    run.emit("spec", target=target_fig["shape"], draft=draft_fig["shape"], k=k,
             target_only_tok_s=alone, spec_tok_s=rate, measured_speedup=rate / alone, alpha=alpha,
             c=c, v=v, predicted_at_measured_alpha=ideal_speedup(alpha or 0.0, k, c, v),
             predicted_at=predicted, best_k_at=best,
             syncs_per_round=count_syncs(target, drafter, k, prompt))


def free(*objects) -> None:
    del objects
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    run = Run(args)
    copy_bytes = (1 << 20) if args.tiny else (2 << 30)
    bandwidth = run.guarded("copy", lambda: copy_bandwidth(args.device, copy_bytes))
    if bandwidth:
        run.emit("copy", bytes=copy_bytes, bandwidth_bytes_per_s=bandwidth)
    for quant in args.quant:
        if quant != "none" and not args.device.startswith("cuda"):
            run.emit("model", quant=quant, skipped="bitsandbytes needs CUDA")
            continue
        models = {}
        for shape in args.shapes:
            result = run.guarded("model", lambda: measure_model(run, shape, quant), shape=shape,
                                 quant=quant)
            if result is None:
                continue
            model, figures = result
            if bandwidth:
                figures["bandwidth_share_of_copy"] = figures["bandwidth_bytes_per_s"] / bandwidth
            run.emit("model", **figures)
            models[shape] = (model, figures)
        if quant == "none" and "8b" in models:
            draft = models.get("1b", (None, None))
            run.guarded("spec", lambda: speculative_runs(run, models["8b"][0], draft[0],
                                                         models["8b"][1], draft[1]))
        free(models)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: a dry run of the plumbing")
    parser.add_argument("--shapes", default="1b,8b", type=lambda s: s.split(","))
    parser.add_argument("--quant", default="none,8bit,4bit", type=lambda s: s.split(","))
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=500.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
