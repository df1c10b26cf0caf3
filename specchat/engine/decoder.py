"""The decoding loop: a generator that yields one `Round` per verify pass.

One round: the drafter proposes up to k tokens, the target scores the last
committed token plus the drafts in one forward pass, `verify` keeps a prefix of
the drafts and adds one target token (resampled after a rejection, bonus after a
full accept, plain `target` when nothing was drafted), and both caches roll back
to the committed length. The last event is a `Finished` with the stop reason.

Invariant, checked after every round: the target's cache holds every committed
token but the newest (which is the next round's input). The draft's holds a
prefix of them: after a round that drafted, all but at most its own last draft
(never fed after a full accept); it feeds whatever it lacks first when it next
proposes. After a stop mid-draft both are back at the committed length.

Knows token ids only: no text, no tokenizer, no UI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Protocol

import torch

from specchat.engine.drafters import Proposal
from specchat.engine.protocol import CausalModel
from specchat.engine.sampling import SamplingParams
from specchat.engine.verify import verify

TokenKind = Literal["resampled", "bonus", "target"]
StopReason = Literal["eos", "max_tokens", "stopped"]


class EngineInvariantError(AssertionError):
    """A cache length disagrees with the committed sequence: a bug, not a user error."""


class Drafter(Protocol):
    def prefill(self, sequence: torch.Tensor) -> None: ...
    def propose(self, sequence: torch.Tensor, k: int, params: SamplingParams,
                generator: torch.Generator | None,
                should_stop: Callable[[], bool]) -> Proposal: ...
    def rollback(self, committed_length: int) -> None: ...
    max_cache_lag: int


@dataclass(frozen=True)
class Round:
    """What one verify pass decided."""

    accepted: tuple[int, ...]
    """Drafts the target kept, in order (a prefix of the proposal)."""
    rejected: tuple[int, ...]
    """Drafts thrown away: the first rejected one and everything after it."""
    token: int | None
    """The target's own token after the accepted drafts; None if an accepted EOS ended the answer."""
    token_kind: TokenKind
    draft_s: float
    verify_s: float
    k: int
    """The draft length asked for this round (0 for plain decoding)."""

    @property
    def drafted(self) -> int:
        return len(self.accepted) + len(self.rejected)

    @property
    def committed(self) -> tuple[int, ...]:
        return self.accepted + (() if self.token is None else (self.token,))


@dataclass(frozen=True)
class Finished:
    """The answer is complete."""

    stop_reason: StopReason
    new_tokens: int


@dataclass
class Settings:
    """Knobs read at the start of every round, so changes apply from the next one."""

    k: int = 4
    sampling: SamplingParams = field(default_factory=SamplingParams)
    k_policy: Callable[[], int] | None = None
    """When set (k = "auto"), called each round instead of reading `k`."""

    def draft_length(self) -> int:
        return self.k_policy() if self.k_policy is not None else self.k


Event = Round | Finished


class Decoder:
    """Speculative decoding of one answer at a time over a target and a drafter."""

    def __init__(self, target: CausalModel, drafter: Drafter | None,
                 eos_ids: set[int], check_invariants: bool = True):
        self.target = target
        self.drafter = drafter
        self.eos_ids = set(eos_ids)
        self.check_invariants = check_invariants

    def generate(self, prompt: list[int], settings: Settings, max_new_tokens: int,
                 generator: torch.Generator | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> Iterator[Event]:
        """Yield a `Round` per verify pass, then one `Finished`."""
        if not prompt:
            raise ValueError("the prompt must hold at least one token")
        sequence = torch.tensor(prompt, dtype=torch.long, device=self.target.device)
        self._prefill(sequence)
        produced = 0
        while True:
            reason = self._stop_reason(sequence, produced, max_new_tokens, should_stop)
            if reason is not None:
                yield Finished(reason, produced)
                return
            event = self._round(sequence, settings, max_new_tokens - produced, generator, should_stop)
            if event is None:  # stopped while drafting; caches are back at the committed length
                yield Finished("stopped", produced)
                return
            sequence = torch.cat([sequence, torch.tensor(event.committed, dtype=torch.long,
                                                         device=sequence.device)])
            produced += len(event.committed)
            self._check(sequence, event)
            yield event

    def _prefill(self, sequence: torch.Tensor) -> None:
        self.target.reset()
        if sequence.shape[0] > 1:
            self.target.forward(sequence[:-1], keep=1)
        if self.drafter is not None:
            self.drafter.prefill(sequence)

    def _stop_reason(self, sequence, produced, max_new_tokens, should_stop) -> StopReason | None:
        if produced and int(sequence[-1]) in self.eos_ids:
            return "eos"
        if produced >= max_new_tokens:
            return "max_tokens"
        if should_stop():
            return "stopped"
        return None

    def _round(self, sequence, settings: Settings, budget: int, generator,
               should_stop) -> Round | None:
        params = settings.sampling
        k = max(0, min(settings.draft_length(), budget - 1))
        started = time.perf_counter()
        proposal = self._propose(sequence, k, params, generator, should_stop)
        if proposal is None:
            return None
        drafts = self._cut_after_eos(proposal)
        drafted_at = time.perf_counter()
        logits = self.target.forward(torch.cat([sequence[-1:], drafts.tokens]), keep=len(drafts) + 1)
        n, token = verify(drafts.tokens, drafts.probs, logits, params, generator)
        verified_at = time.perf_counter()
        event = self._make_round(drafts.tokens.tolist(), n, token, k, drafted_at - started,
                                 verified_at - drafted_at)
        committed_length = sequence.shape[0] + len(event.committed)
        self.target.crop(committed_length - 1)
        if self.drafter is not None:
            self.drafter.rollback(committed_length)
        return event

    def _propose(self, sequence, k, params, generator, should_stop) -> Proposal | None:
        from specchat.engine.drafters import empty_proposal

        if self.drafter is None or k == 0:
            return empty_proposal(sequence.device)
        proposal = self.drafter.propose(sequence, k, params, generator, should_stop)
        if should_stop() and len(proposal) < k:
            self.drafter.rollback(sequence.shape[0])
            return None
        return proposal

    def _cut_after_eos(self, proposal: Proposal) -> Proposal:
        """An EOS inside the drafts ends the answer there: drop what follows it."""
        ids = proposal.tokens.tolist()
        for i, token in enumerate(ids):
            if token in self.eos_ids:
                probs = None if proposal.probs is None else proposal.probs[: i + 1]
                return Proposal(proposal.tokens[: i + 1], probs)
        return proposal

    def _make_round(self, drafts: list[int], n: int, token: int, k: int,
                    draft_s: float, verify_s: float) -> Round:
        accepted, rejected = tuple(drafts[:n]), tuple(drafts[n:])
        if accepted and accepted[-1] in self.eos_ids:
            token = None
        if not drafts:
            kind: TokenKind = "target"
        else:
            kind = "bonus" if not rejected else "resampled"
        return Round(accepted, rejected, token, kind, draft_s, verify_s, k)

    def _check(self, sequence: torch.Tensor, event: Round) -> None:
        if not self.check_invariants:
            return
        expected = sequence.shape[0] - 1
        if self.target.cache_length != expected:
            raise EngineInvariantError(
                f"target cache holds {self.target.cache_length} tokens, expected {expected}")
        model = getattr(self.drafter, "model", None)
        if model is None:
            return
        # a round that drafted leaves the draft at most `max_cache_lag` behind; one that
        # did not (k = 0) leaves it wherever it was, and its next proposal catches up
        lowest = expected - self.drafter.max_cache_lag if event.drafted else 0
        if not lowest <= model.cache_length <= expected:
            raise EngineInvariantError(
                f"draft cache holds {model.cache_length} tokens, expected {lowest}..{expected}")
