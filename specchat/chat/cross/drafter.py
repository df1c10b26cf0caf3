"""A drafter for a draft model of another tokenizer: it proposes the target's tokens.

The engine's `Decoder` asks any drafter for target token ids and, when sampling, the
distribution each was drawn from; it verifies them as it verifies any draft, so what is
committed stays the target's, token for token. This drafter keeps the draft model's own
tokens for the committed text (context.py) and proposes by one of the two lossless methods
of Timor et al. (ICML 2025, "Accelerating LLM Inference with Lossless Speculative Decoding
Algorithms for Heterogeneous Vocabularies"):
- greedy (temperature 0), string-level exact match: the draft writes its greedy text, the
  target's tokenizer turns it into target tokens (text.py), and the target keeps those that
  equal its own argmax. Any proposal is lossless here; this one is the draft's best guess.
- sampling, token-level intersection (TLI): the draft samples only among its tokens that
  spell exactly one target token (vocabulary.py), renormalized after the same temperature,
  top-k and top-p as the target's; the proposal's q is that distribution moved onto the
  target's columns, and the engine's rejection sampling keeps the target's distribution
  exactly, as for a same-tokenizer draft.

`alignment` holds how the last proposal's target tokens line up with the draft's tokens
(text.py: "one", "merged", "split"); the chat layer shows it. The draft model is
`draft_model`, not `model`: the decoder feeds and checks a drafter's `model` in the
target's tokens. Knows token ids and bytes; the tokenizers are vocabulary.py's.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

from specchat.chat.cross.context import DraftContext
from specchat.chat.cross.text import TextProposal
from specchat.chat.cross.vocabulary import CrossVocabulary
from specchat.chat.events import ONE
from specchat.engine.drafters import Proposal, empty_proposal
from specchat.engine.params import SamplingParams
from specchat.engine.sampling import sample, to_probs
from specchat.engine.verify import row_argmax

EXTRA_STEPS = 2
"""Draft steps beyond k the string-level method may take to complete k target tokens."""


class CrossTokenizerDrafter:
    """Drafts target tokens with a model of another tokenizer (module docstring)."""

    max_cache_lag = 0

    def __init__(self, draft_model: Any, vocabulary: CrossVocabulary, target_eos: Iterable[int]):
        self.draft_model = draft_model
        self.vocabulary = vocabulary
        self.context = DraftContext(draft_model, vocabulary)
        self.target_eos = frozenset(target_eos)
        self.alignment: tuple[str, ...] = ()
        """How each token of the last proposal lines up with the draft's tokens."""

    def reset(self) -> None:
        self.context.reset()
        self.alignment = ()

    def resume(self, prompt: list[int], kept: int) -> int:
        """A new answer: the draft's context is rebuilt from the prompt's text, and its cache
        keeps what it holds of the prompt's draft tokens; the target keeps its `kept`."""
        self.context.resume()
        self.alignment = ()
        return kept

    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = lambda: False,
                committed: list[int] | None = None) -> Proposal:
        self.alignment = ()
        self.context.sync(sequence.tolist() if committed is None else committed)
        room = self.context.room()
        if k <= 0 or self.vocabulary.size == 0 or (room is not None and room < k + EXTRA_STEPS):
            return empty_proposal(sequence.device)
        if params.greedy:
            return self._by_text(k, should_stop, sequence.device)
        return self._by_intersection(k, params, generator, should_stop, sequence.device)

    def rollback(self, committed_length: int) -> None:
        """Nothing to do now: the next proposal's sync reads what was committed."""

    def _by_text(self, k: int, should_stop: Callable[[], bool],
                 device: torch.device) -> Proposal:
        """String-level: the draft's greedy text, as the target's tokens."""
        context = self.context
        proposal = TextProposal(self.vocabulary, context.held(), bytes(context.text[-4:]))
        for _ in range(k + EXTRA_STEPS):
            logits = None if should_stop() else context.step(should_stop)
            if logits is None:
                break
            token = int(row_argmax(logits[None, :self.vocabulary.draft_columns])[0])
            context.push(token)
            if proposal.add(token) >= k or proposal.ended:
                break
        ids, self.alignment = proposal.result(k)
        if not ids:
            return empty_proposal(device)
        return Proposal(torch.tensor(ids, dtype=torch.long, device=device), None)

    def _by_intersection(self, k: int, params: SamplingParams,
                         generator: torch.Generator | None, should_stop: Callable[[], bool],
                         device: torch.device) -> Proposal:
        """Token-level intersection: sampled among the draft tokens the target has too."""
        vocabulary, tokens, rows = self.vocabulary, [], []
        for _ in range(k):
            logits = None if should_stop() else self.context.step(should_stop)
            if logits is None:
                break
            token, row = self._draw(logits, params, generator)
            self.context.push(token)
            tokens.append(int(vocabulary.to_target[token]))
            rows.append(row)
            if token in vocabulary.draft.special or tokens[-1] in self.target_eos:
                break
        self.alignment = (ONE,) * len(tokens)
        if not tokens:
            return empty_proposal(device)
        return Proposal(torch.tensor(tokens, dtype=torch.long, device=device),
                        torch.stack(rows).to(device))

    def _draw(self, logits: torch.Tensor, params: SamplingParams,
              generator: torch.Generator | None) -> tuple[int, torch.Tensor]:
        """(a draft token sampled among the intersection, the distribution it was drawn from
        on the target's columns)."""
        q = restricted(logits, self.vocabulary, params)
        return int(sample(q, generator)), self.vocabulary.target_row(q)


def restricted(logits: torch.Tensor, vocabulary: CrossVocabulary,
               params: SamplingParams) -> torch.Tensor:
    """The draft's processed distribution over the tokens the target has too: the others
    masked first, then the target's temperature, top-k and top-p."""
    masked = logits[:vocabulary.draft_columns].masked_fill(
        ~vocabulary.mapped.to(logits.device), float("-inf"))
    return to_probs(masked, params)
