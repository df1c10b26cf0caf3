"""Full-vocabulary logits from a head that computes only some tokens' rows (a draft's reduced
output vocabulary): -inf everywhere else, so the engine sees q = 0 there. Knows nothing
about models.
"""

from __future__ import annotations

import torch


def scatter_logits(small: torch.Tensor, vocab: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Full-vocabulary rows from logits over `vocab` (sorted ids): -inf everywhere else.
    Ids at or past `vocab_size` (a head wider than the tokenizer) land in one spare column
    that is cut off, so nothing is read back to the host (a sync per draft step on a GPU)."""
    logits = torch.full((small.shape[0], vocab_size + 1), float("-inf"), device=small.device)
    logits[:, vocab.clamp_max(vocab_size)] = small
    return logits[:, :vocab_size]
