"""A draft whose output head covers only part of the vocabulary.

`ReducedVocabModel` runs the model's transformer body with the usual KV cache,
then multiplies the last hidden states by only the head rows of the allowed
token ids (a few thousand instead of the full vocabulary), and scatters those
logits into a full-vocabulary row filled with -inf. The engine therefore sees
an ordinary draft that simply never proposes the other tokens (q = 0 there);
verification against the target still corrects every position, so decoding
stays lossless. Knows nothing about training.
"""

from __future__ import annotations

import torch

from specchat.models.blocks.logits import scatter_logits
from specchat.models.torch_backend.hf import HFCausalModel


class ReducedVocabModel(HFCausalModel):
    """An `HFCausalModel` whose logits are -inf outside `vocab`."""

    def __init__(self, model, vocab: list[int], vocab_size: int | None = None):
        super().__init__(model, vocab_size)
        self.vocab = torch.tensor(sorted(vocab), dtype=torch.long, device=self.device)
        head = model.get_output_embeddings().weight
        self.head = head.detach()[self.vocab].contiguous()
        """[len(vocab), hidden]: the head rows of the allowed tokens, in the model's dtype."""

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        if self._cache is None:
            self.reset()
        ids, start = ids.reshape(1, -1).to(self.device), self.cache_length
        body = self.model.get_decoder()
        hidden = body(input_ids=ids, past_key_values=self._cache, use_cache=True).last_hidden_state
        self.held.fed(start, ids)
        return scatter_logits((hidden[0, -keep:] @ self.head.T).float(), self.vocab,
                              self.vocab_size)
