"""`bench synthetic 1b,8b`: verify cost vs tokens on random-weight models with real
Llama shapes, and the draft/target step cost ratio c between consecutive sizes.
Nothing is downloaded. On CPU the depth may be reduced (reported in the output):
per-layer costs keep their shape, absolute times and c do not.
"""

from __future__ import annotations

import gc

import torch

from specchat.bench.format import table
from specchat.engine.costs import WIDTHS, verify_costs

CONTEXT_TOKENS = 256


def profile_synthetic(names: list[str], device: str, dtype: torch.dtype, layers: int | None,
                      repeats: int = 3) -> dict:
    from specchat.models.torch_backend.synthetic import synthetic_model

    models = {}
    for name in names:
        model, full = synthetic_model(name, device, dtype, layers)
        context = [(1000 + i) % model.vocab_size for i in range(CONTEXT_TOKENS)]
        used = len(model.model.model.layers)
        costs = verify_costs(model, context, WIDTHS, repeats)
        models[name] = {"layers": used, "full_layers": full,
                        "verify_ms": {w: s * 1000 for w, s in costs.items()},
                        "v": {w: s / costs[1] for w, s in costs.items()}}
        del model
        gc.collect()
    pairs = {f"{a}->{b}": models[a]["verify_ms"][1] / models[b]["verify_ms"][1]
             for a, b in zip(names, names[1:])}
    return {"device": device, "dtype": str(dtype).replace("torch.", ""),
            "context_tokens": CONTEXT_TOKENS, "models": models, "c": pairs}


def format_synthetic(result: dict) -> str:
    widths = WIDTHS
    rows = [["model", "layers"] + [str(w) for w in widths]]
    for name, info in result["models"].items():
        depth = f"{info['layers']}/{info['full_layers']}"
        rows.append([f"{name} ms", depth] + [f"{info['verify_ms'][w]:.1f}" for w in widths])
        rows.append([f"{name} v", depth] + [f"{info['v'][w]:.2f}" for w in widths])
    lines = [f"synthetic Llama shapes, random weights, {result['device']} {result['dtype']}, "
             f"verify of n tokens after {result['context_tokens']} cached:", table(rows)]
    reduced = [n for n, i in result["models"].items() if i["layers"] < i["full_layers"]]
    if reduced:
        lines.append(f"NOTE: reduced depth for {', '.join(reduced)} so it runs here; v(n) per layer "
                     "keeps its shape, absolute ms and c between sizes do not")
    lines += [f"c({pair}) = one-token step of the first / of the second: {c:.3f}"
              for pair, c in result["c"].items()]
    return "\n".join(lines)
