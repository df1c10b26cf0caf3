"""A transformers causal LM answering a batch of sequences in lockstep, keeping the final
hidden states of every token fed: where `specchat distill --head` collects a head's
training features on a GPU (distill/head_data.py `wave_answers`; on a CPU the int8
backend's batch does).

The features are the base model's last hidden state, after its final norm: what the
head reads at decoding time from torch's static forward (`StaticLlama.features`) and from
the int8 backend. They and the last row's logits come back on the CPU, the logits in
float32 (each answer samples with its own CPU generator), the features in float16 (what a
shard keeps). Knows nothing about heads, prompts or shards.
"""

from __future__ import annotations

from typing import Any

import torch


class FeatureWave:
    """`head_data.WaveModel` over a transformers causal LM (Llama, Qwen2 and the like)."""

    def __init__(self, model: Any):
        self.model = model
        self.device = next(model.parameters()).device
        self.cache: Any = None

    def start(self) -> None:
        from transformers import DynamicCache

        self.cache = DynamicCache()

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, mask: torch.Tensor,
                positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model.get_decoder()(input_ids=ids.to(self.device),
                                       attention_mask=mask.to(self.device),
                                       position_ids=positions.to(self.device),
                                       past_key_values=self.cache, use_cache=True)
        hidden = out.last_hidden_state
        logits = self.model.get_output_embeddings()(hidden[:, -1])
        return logits.float().cpu(), hidden.to(torch.float16).cpu()
