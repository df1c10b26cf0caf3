"""Drafters: where the proposed tokens of a round come from.

Every drafter answers `propose(sequence, k, ...)` with up to k token ids and the
processed distributions they were drawn from (None for a deterministic drafter),
and is told the committed length after each round so it can roll back.

- `ModelDrafter`: a small causal model sampled autoregressively.
- `NgramDrafter`: prompt lookup: match the last n tokens earlier in the sequence
  and propose what followed there. No model, no distribution.
- `LookupFirstDrafter`: both: the lookup where text is being copied (free), a drafter
  (the model's) elsewhere.

`Drafter` is the protocol the decoder asks of any of them (a draft of another tokenizer's
too, chat/cross/).

They know nothing about text, tokenizers or how models are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from specchat.engine.held_tokens import kept_prefix
from specchat.engine.params import SamplingParams
from specchat.engine.protocol import CausalModel
from specchat.engine.sampling import sample, to_probs
from specchat.engine.verify import row_argmax


@dataclass
class Proposal:
    """The drafts of one round."""

    tokens: torch.Tensor
    """Proposed ids, shape [n] with n <= k (n = 0: nothing to propose)."""
    probs: torch.Tensor | None
    """Processed q each token was drawn from, [n, vocab]; None if deterministic."""

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def empty_proposal(device: torch.device) -> Proposal:
    return Proposal(torch.empty(0, dtype=torch.long, device=device), None)


class Drafter(Protocol):
    def reset(self) -> None: ...
    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = ..., committed: list[int] | None = None,
                ) -> Proposal:
        """Up to k drafts after `sequence`; `committed` is the same tokens as host ints (the
        decoder's own list): a drafter that reads token values reads these, since reading
        `sequence` is a synchronisation on a GPU."""
    def rollback(self, committed_length: int) -> None: ...
    @property
    def max_cache_lag(self) -> int:
        """How many committed tokens the draft model's cache may lack after a drafting round."""
        ...
    # optional: target_fed(start), called after every target forward (head_drafter.py);
    # will_look_up(committed), asked before k is chosen (LookupFirstDrafter);
    # resume(prompt, kept) -> kept, asked instead of `reset` where the target's cache keeps
    # the prompt's first `kept` tokens: keep what of the drafter's state still reads the
    # prompt, and say how many the target may keep (at most `kept`; decoder.py's `prepare`);
    # settle(sequence), told the committed sequence when an answer ends


class ModelDrafter:
    """Drafts by sampling a small model, with the same processing as the target.

    The draft's cache lags the committed sequence by one token after a round in
    which every draft was accepted (it never fed its own last draft); `propose`
    feeds whatever the cache lacks first, so it always catches up.
    """

    max_cache_lag = 1
    """After a full accept the cache lacks the last draft until the next proposal."""

    def __init__(self, model: CausalModel):
        self.model = model

    def reset(self) -> None:
        """Start a new answer: empty the cache (the first proposal feeds the prompt)."""
        self.model.reset()

    def resume(self, prompt: list[int], kept: int) -> int:
        """A new answer: the draft's cache keeps what it holds of the prompt by its own record
        (all but the prompt's last token at most); the target keeps its `kept`."""
        self.model.crop(min(kept_prefix(self.model, prompt), len(prompt) - 1))
        return kept

    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = lambda: False,
                committed: list[int] | None = None) -> Proposal:
        tokens: list[torch.Tensor] = []
        probs: list[torch.Tensor] = []
        feed = sequence[self.model.cache_length:]
        for _ in range(k):
            if should_stop():
                break
            logits = self.model.forward(feed, keep=1)
            token, q = self._choose(logits, params, generator)
            tokens.append(token)
            if q is not None:
                probs.append(q)
            feed = token
        if not tokens:
            return empty_proposal(sequence.device)
        return Proposal(torch.cat(tokens), None if params.greedy else torch.stack(probs))

    @staticmethod
    def _choose(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the next draft token as a [1] tensor, the processed q it was drawn from). Greedy
        takes the argmax of the last row and builds no q: a one-hot q over a 152k vocabulary
        cost several milliseconds a draft step, and greedy verification never reads it."""
        if params.greedy:
            return row_argmax(logits[-1:]), None
        q = to_probs(logits[-1], params)
        return sample(q, generator).reshape(1), q

    def rollback(self, committed_length: int) -> None:
        """Keep at most the committed tokens but the newest (the next input)."""
        self.model.crop(min(self.model.cache_length, committed_length - 1))


class NgramDrafter:
    """Prompt lookup: propose what followed the latest earlier match of the last n tokens.

    Tries the longest n first (`max_ngram` down to `min_ngram`) and the most recent
    match first. Proposes nothing when no match exists, so the round becomes a
    plain decoding step with no wasted verify. The proposal length adapts like
    TCP's window: it doubles after a full accept and drops to one more than the
    accepted count after a rejection, so open chat (few matches that hold) pays for
    short verifies while copying text quickly grows to the full k. A match that
    runs further back than the n-gram looked up is evidence of text being copied:
    such a proposal is at least as long as the match beyond its first n-1 tokens,
    so a copy resumed after a correction goes back to long proposals at once.
    Under k = "auto" there is no window (`window=False`): the policy sizes each proposal.
    """

    max_cache_lag = 0
    MAX_LENGTH = 64

    def __init__(self, max_ngram: int = 3, min_ngram: int = 2, start_length: int = 2,
                 window: bool = True):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.window = window
        """False: no window, propose all of k (k = "auto" chose k from measured costs and
        acceptance, engine/adaptive.py; a window under it would only cut that shorter)."""
        self.start_length = start_length if window else self.MAX_LENGTH
        self.length = self.start_length
        self._proposed = 0
        self._base = 0

    def reset(self) -> None:
        self.length = self.start_length
        self._proposed = 0

    def resume(self, prompt: list[int], kept: int) -> int:
        """A new answer: nothing of the lookup's is kept, the target keeps its `kept`."""
        self.reset()
        return kept

    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = lambda: False,
                committed: list[int] | None = None) -> Proposal:
        ids = sequence.tolist() if committed is None else committed
        return self.propose_match(find_match(ids, self.max_ngram, self.min_ngram), ids, k,
                                  sequence.device)

    def propose_match(self, match: "Match | None", ids: list[int], k: int,
                      device: torch.device) -> Proposal:
        """The proposal of a match already looked up in `ids` (None: nothing to propose)."""
        length = min(k, max(self.length, match.span - match.n + 1)) if match else 0
        found = ids[match.start:match.start + length] if match else []
        self._proposed, self._base = len(found), len(ids)
        if not found:
            return empty_proposal(device)
        # not waiting for the device: a blocking copy from the host would be a sync a round
        return Proposal(torch.tensor(found, dtype=torch.long).to(device, non_blocking=True),
                        None)

    def rollback(self, committed_length: int) -> None:
        """Learn from the verdict: committed = base + accepted + 1 target token."""
        if not self._proposed:
            return
        accepted = max(0, min(self._proposed, committed_length - self._base - 1))
        full = accepted == self._proposed
        if self.window:
            self.length = min(self.MAX_LENGTH, 2 * self.length if full else accepted + 1)
        self._proposed = 0


class LookupFirstDrafter:
    """Prompt lookup where the answer is copying text, the draft model everywhere else.

    Each round looks the sequence's end up first: a match whose common run reaches
    `COPY_SPAN` tokens means text is being copied (an edit, an extraction), and its
    continuation is proposed for nothing; otherwise the model drafts. Which one proposes
    depends only on the committed tokens, never on the round being decided, so sampling
    stays lossless (each round's proposal comes with its own q: the model's, or none for
    the lookup's deterministic tokens). The model's cache may fall behind through lookup
    rounds; its next proposal feeds what it lacks. The drafter may be any (a draft of
    another tokenizer's, chat/cross/, feeds its model itself, and a head reads the target's
    features: `model` is then None).
    """

    COPY_SPAN = 4
    CATCHES_UP = 1 << 30
    """The model's cache lag after a lookup round: any (it catches up when it next drafts)."""

    def __init__(self, drafter: ModelDrafter | Drafter, lookup: NgramDrafter):
        self.drafter, self.lookup = drafter, lookup
        self.by_lookup = False
        """Whether the last proposal was the lookup's."""
        self._looked_up: tuple[int, Match | None] | None = None
        """(sequence length, its match) of the last look-up, reused by the proposal after it."""

    @property
    def model(self) -> CausalModel | None:
        """The draft model the decoder feeds and checks: the inner drafter's, if it has one."""
        model: CausalModel | None = getattr(self.drafter, "model", None)
        return model

    @property
    def max_cache_lag(self) -> int:
        return self.CATCHES_UP if self.by_lookup else self.drafter.max_cache_lag

    def reset(self) -> None:
        self.drafter.reset()
        self.lookup.reset()
        self._looked_up = None

    def resume(self, prompt: list[int], kept: int) -> int:
        """A new answer: the inner drafter keeps what it can (it may ask the target to keep
        fewer tokens); the lookup starts over."""
        self.lookup.reset()
        self._looked_up = None
        return resumed(self.drafter, prompt, kept)

    def will_look_up(self, committed: list[int]) -> bool:
        """Whether the next proposal after `committed` is the lookup's (the decoder asks
        first, so that k = "auto" sizes it on the lookup's own acceptance)."""
        return self._copying(committed)

    def _copying(self, ids: list[int]) -> bool:
        """Whether `ids` end in a match running `COPY_SPAN` tokens or more."""
        match = self._match(ids)
        return match is not None and match.span >= self.COPY_SPAN

    def _match(self, ids: list[int]) -> "Match | None":
        if self._looked_up is None or self._looked_up[0] != len(ids):
            self._looked_up = (len(ids), find_match(ids, self.lookup.max_ngram,
                                                    self.lookup.min_ngram))
        return self._looked_up[1]

    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool] = lambda: False,
                committed: list[int] | None = None) -> Proposal:
        ids = sequence.tolist() if committed is None else committed
        self.by_lookup = self._copying(ids)
        if self.by_lookup:
            return self.lookup.propose_match(self._match(ids), ids, k, sequence.device)
        return self.drafter.propose(sequence, k, params, generator, should_stop, committed)

    def settle(self, sequence: torch.Tensor) -> None:
        """The answer ended: pass it on to a drafter that catches up then (a head)."""
        settle = getattr(self.drafter, "settle", None)
        if settle is not None:
            settle(sequence)

    def target_fed(self, start: int) -> None:
        """Pass the target's forwards on to a drafter that reads its features (a head,
        engine/head_drafter.py): it keeps those of lookup rounds too, for its next proposal."""
        target_fed = getattr(self.drafter, "target_fed", None)
        if target_fed is not None:
            target_fed(start)

    def rollback(self, committed_length: int) -> None:
        self.drafter.rollback(committed_length)
        self.lookup.rollback(committed_length)


def resumed(drafter: Drafter, prompt: list[int], kept: int) -> int:
    """Ready `drafter` for a new answer whose prompt's first `kept` tokens the target's cache
    holds: its `resume` where it has one and something is kept, else `reset`; how many
    tokens the target may keep."""
    resume = getattr(drafter, "resume", None)
    if kept and resume is not None:
        return int(resume(prompt, kept))
    drafter.reset()
    return kept


@dataclass(frozen=True)
class Match:
    """The most recent earlier occurrence of the sequence's last n tokens."""

    start: int
    """Index of the token that followed the occurrence: where a proposal starts."""
    n: int
    """Length of the suffix looked up."""
    span: int
    """How many tokens before `start` agree with the sequence's end (>= n, capped)."""


MAX_SPAN = 64


def find_match(ids: list[int], max_ngram: int, min_ngram: int) -> Match | None:
    """The latest earlier occurrence of the longest suffix of n tokens that has one."""
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        suffix = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):
            if ids[start:start + n] == suffix:
                return Match(start + n, n, matched_span(ids, start + n, n))
    return None


def matched_span(ids: list[int], end: int, n: int) -> int:
    """Length of the common run ending just before `end` and at the sequence's end."""
    span = n
    while span < MAX_SPAN and end - span - 1 >= 0 and ids[end - span - 1] == ids[-span - 1]:
        span += 1
    return span


def find_continuation(ids: list[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    """Up to k tokens that followed the most recent earlier occurrence of the suffix."""
    match = find_match(ids, max_ngram, min_ngram) if k > 0 else None
    return ids[match.start:match.start + k] if match else []
