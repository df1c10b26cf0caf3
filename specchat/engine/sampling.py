"""Turning logits into the distribution a token is drawn from.

The same processing (temperature, top-k, top-p) is applied to the target's p and
the draft's q, so the acceptance ratio p/q compares like with like. Temperature 0
means greedy: the distribution is one-hot on the argmax; so does a temperature too
small for float32 to divide by (`logits / T` would overflow to NaN probabilities).
`top_p = 0` keeps the top token only. Tensors in, tensors out; randomness only from
the `torch.Generator` passed in. `SamplingParams` itself lives in engine/params.py
(torch-free, so every layer can hold one).
"""

from __future__ import annotations

import torch

from specchat.engine.params import SamplingParams


def _mask_top_k(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _mask_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    # drop a token when the tokens before it already reach top_p; the first always
    # stays (also at top_p = 0, which therefore keeps the top token only)
    drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= top_p
    drop_sorted[..., 0] = False
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def to_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Processed distribution(s) over the vocabulary, float32, rows sum to 1."""
    logits = logits.float()
    if params.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = _mask_top_k(_scaled(logits, params.temperature), params.top_k)
    return _mask_top_p(logits, params.top_p).softmax(dim=-1)


def _scaled(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(logits - max) / T: every entry <= 0 and the top one exactly 0, so a tiny T
    sends the others to -inf (probability 0) instead of overflowing to inf - inf."""
    return (logits - logits.amax(dim=-1, keepdim=True)) / temperature


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token id per row of `probs` (shape [..., vocab] -> [...])."""
    flat = probs.reshape(-1, probs.shape[-1])
    drawn = torch.multinomial(flat, 1, generator=generator)
    return drawn.reshape(probs.shape[:-1])


def next_token(logits: torch.Tensor, params: SamplingParams,
               generator: torch.Generator | None) -> torch.Tensor:
    """Pick the next token from logits [.., vocab]: argmax when greedy, else sampled."""
    if params.greedy:
        return logits.argmax(-1)
    return sample(to_probs(logits, params), generator)
