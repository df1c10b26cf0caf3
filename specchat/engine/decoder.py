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
proposes. A round cancelled mid-draft leaves no cache holding more than the
committed tokens (the draft is rolled back; the target was not fed).

An answer may keep what the caches already hold of its prompt (`keep`): a chat's next
question renders the whole conversation again, and only its new turn needs reading. Each
model's own record of its cache (engine/held_tokens.py) says how much of the prompt it
holds; the target is rolled back to that, and the drafter keeps what still reads the
prompt (`resume`). Anything else that used the model meanwhile changed its record, so a
stale cache is never kept.

Knows token ids only: no text, no tokenizer, no UI.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Sequence

import torch

from specchat.engine.drafters import Drafter as Drafter, Proposal, empty_proposal, resumed
from specchat.engine.events import Event, Finished, Round, StopReason, TokenKind  # noqa: F401
from specchat.engine.held_tokens import kept_prefix
from specchat.engine.params import SamplingParams
from specchat.engine.protocol import CausalModel
from specchat.engine.round_clock import RoundClock, round_clock
from specchat.engine.verify import numpy_friendly, verify

PREFILL_FIRST_CHUNK = 64
"""Tokens of a long prompt's first catch-up forward; a prompt up to this long travels whole
in the round's own forward."""
PREFILL_CHUNK_S = 0.5
"""What each catch-up forward should take: how soon Esc lands while a long prompt prefills
(one thread of a 2-core CPU prefills the 1.5B Qwen target at about 50 tokens/s, so a fixed
256-token chunk held the model for 5 s)."""
PREFILL_CHUNK_RANGE = (16, 1024)


def next_chunk(size: int, seconds: float) -> int:
    """The catch-up chunk after one of `size` tokens that took `seconds`: scaled towards
    `PREFILL_CHUNK_S`, at most 4× the last (one timing may be a warm-up's), within range."""
    low, high = PREFILL_CHUNK_RANGE
    wanted = size * PREFILL_CHUNK_S / seconds if seconds > 0 else high
    return int(max(low, min(high, 4 * size, wanted)))


class EngineInvariantError(AssertionError):
    """A cache length disagrees with the committed sequence: a bug, not a user error."""


@dataclass
class Settings:
    """Knobs read at the start of every round, so changes apply from the next one."""

    k: int = 4
    sampling: SamplingParams = field(default_factory=SamplingParams)
    k_policy: Callable[[], int] | None = None
    """When set (k = "auto"), called each round instead of reading `k`."""

    def draft_length(self, by_lookup: bool = False) -> int:
        """k for the next round; `by_lookup`: its drafts will be prompt lookup's, which an
        adaptive policy with a `lookup_length` sizes on their own acceptance (free drafts)."""
        if self.k_policy is None:
            return self.k
        lookup_length = getattr(self.k_policy, "lookup_length", None)
        if by_lookup and lookup_length is not None:
            return int(lookup_length())
        return self.k_policy()

    def observe(self, event: "Round") -> None:
        """Tell an adaptive policy (one with `observe`, e.g. engine.adaptive.AdaptiveK) what a round did."""
        observe = getattr(self.k_policy, "observe", None)
        if observe is not None:
            observe(event)




class Decoder:
    """Speculative decoding of one answer at a time over a target and a drafter."""

    def __init__(self, target: CausalModel, drafter: Drafter | None,
                 eos_ids: set[int], check_invariants: bool = True):
        self.target = target
        self.drafter = drafter
        self.eos_ids = set(eos_ids)
        self.check_invariants = check_invariants
        self._clock: RoundClock | None = None
        """The rounds' stopwatch, made for the target's device at the first round."""
        self.kept = 0
        """How many tokens of the latest prompt the target's cache kept (not read again)."""
        self._prepared: tuple[list[int], int] | None = None
        """(prompt, keep) of a `prepare` that `generate` has not started from yet."""

    @property
    def clock(self) -> RoundClock:
        if self._clock is None:
            self._clock = round_clock(self.target.device)
        return self._clock

    def prepare(self, prompt: list[int], keep: int = 0) -> int:
        """Ready the caches for an answer to `prompt`, keeping at most its first `keep` tokens
        where they hold them (0: empty caches); how many the target kept. `generate` calls it
        unless it was just called for the same prompt and `keep` (a caller that wants to say
        how much will be read, first)."""
        if not prompt:
            raise ValueError("the prompt must hold at least one token")
        kept = min(keep, len(prompt) - 1, kept_prefix(self.target, prompt)) if keep > 0 else 0
        if self.drafter is not None:
            kept = resumed(self.drafter, prompt, kept)
        if kept:
            self.target.crop(kept)
        else:
            self.target.reset()
        self.kept, self._prepared = kept, (prompt, keep)
        return kept

    def generate(self, prompt: list[int], settings: Settings, max_new_tokens: int,
                 generator: torch.Generator | None = None,
                 should_stop: Callable[[], bool] = lambda: False, keep: int = 0) -> Iterator[Event]:
        """Yield a `Round` per verify pass, then one `Finished`.

        There is no separate prefill: each model is fed whatever of the sequence its
        cache lacks, so the first round's forward passes carry the prompt (a long one's
        all but its last chunk in chunks of about `PREFILL_CHUNK_S` just before, `_catch_up`).
        `keep`: how many leading prompt tokens may be kept from the caches (`prepare`).
        """
        if self._prepared is None or self._prepared != (prompt, keep):
            self.prepare(prompt, keep)
        self._prepared = None
        ids = list(prompt)
        sequence = torch.tensor(ids, dtype=torch.long, device=self.target.device)
        while True:
            reason = self._stop_reason(ids, len(ids) - len(prompt), max_new_tokens, should_stop)
            if reason is not None:
                self._settle(sequence)
                yield Finished(reason, len(ids) - len(prompt))
                return
            budget = max_new_tokens - (len(ids) - len(prompt))
            done = self._round(sequence, ids, settings, budget, generator, should_stop)
            if done is None:  # stopped while drafting: the round is cancelled
                self._check_cancelled(len(ids))
                self._settle(sequence)
                yield Finished("stopped", len(ids) - len(prompt))
                return
            event, committed = done
            ids.extend(event.committed)
            sequence = torch.cat([sequence, committed])
            self._check(len(ids), event)
            settings.observe(event)
            yield event

    def _settle(self, sequence: torch.Tensor) -> None:
        """Tell a drafter that catches up when an answer ends (a head, engine/head_drafter.py)
        the committed sequence, so the next answer keeps what the target holds."""
        settle = getattr(self.drafter, "settle", None)
        if settle is not None:
            settle(sequence)

    def _stop_reason(self, ids: list[int], produced: int, max_new_tokens: int,
                     should_stop: Callable[[], bool]) -> StopReason | None:
        if produced and ids[-1] in self.eos_ids:
            return "eos"
        if produced >= max_new_tokens:
            return "max_tokens"
        if should_stop():
            return "stopped"
        return None

    def _round(self, sequence: torch.Tensor, ids: list[int], settings: Settings, budget: int,
               generator: torch.Generator | None,
               should_stop: Callable[[], bool]) -> tuple[Round, torch.Tensor] | None:
        """The round's event and its committed tokens on the device (None: cancelled)."""
        params = settings.sampling
        k = 0 if self.drafter is None else max(0, min(
            settings.draft_length(self._will_look_up(ids)), budget - 1))
        if not self._catch_up(sequence, k, should_stop):
            return None
        clock = self.clock
        clock.start()
        proposal = self._propose(sequence, ids, k, params, generator, should_stop)
        if proposal is None:
            return None
        clock.drafted()
        start = self.target.cache_length
        fed = torch.cat([sequence[start:], proposal.tokens])
        logits = self.target.forward(fed, keep=len(proposal) + 1)
        self._target_fed(start)
        kept, chosen = verify(proposal.tokens, proposal.probs, logits, params, generator)
        # the round's one host sync
        drafts, n, token, margins = read_round(proposal.tokens, kept, chosen,
                                               top_two_margins(logits))
        draft_s, verify_s = clock.split()
        by_lookup = bool(len(proposal)) and getattr(self.drafter, "by_lookup", False)
        event = self._make_round(drafts, n, token, k, draft_s, verify_s, fed.shape[0], margins,
                                 by_lookup)
        committed_length = sequence.shape[0] + len(event.committed)
        self.target.crop(committed_length - 1)
        if self.drafter is not None:
            self.drafter.rollback(committed_length)
        return event, committed_tensor(proposal.tokens, chosen, event)

    def _catch_up(self, sequence: torch.Tensor, k: int, should_stop: Callable[[], bool]) -> bool:
        """Feed the target, and the draft model where this round drafts, the committed
        tokens its cache lacks in chunks sized to take about `PREFILL_CHUNK_S` each (all but
        the last chunk, which the round's own forward carries, so a short prompt takes no
        extra forward); False if `should_stop` said so between two (the round is cancelled)."""
        return all(self._feed(model, sequence, should_stop, leave_last_chunk=True)
                   for model in self._models_fed(drafting=k > 0))

    def _models_fed(self, drafting: bool) -> list[CausalModel]:
        """The target, and the draft model where it drafts (a head reads the target's
        features and an n-gram drafter has no model: neither is fed here)."""
        draft = getattr(self.drafter, "model", None)
        return [self.target] + ([draft] if drafting and draft is not None else [])

    def _feed(self, model: CausalModel, sequence: torch.Tensor, should_stop: Callable[[], bool],
              leave_last_chunk: bool) -> bool:
        """Feed `model` what its cache lacks of `sequence`, in chunks of about `PREFILL_CHUNK_S`
        (all of it, or all but a last chunk); False if `should_stop` said so between two."""
        chunk = PREFILL_FIRST_CHUNK
        while sequence.shape[0] - model.cache_length > (chunk if leave_last_chunk else 0):
            if should_stop():
                return False
            start, began = model.cache_length, time.perf_counter()
            model.forward(sequence[start:start + chunk], keep=1)
            chunk = next_chunk(chunk, time.perf_counter() - began)
            if model is self.target:
                self._target_fed(start)
        return True

    def read(self, tokens: list[int], should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Read `tokens` into the caches without answering, keeping what they hold of them:
        idle time spent so that the next answer, whose prompt begins with them, reads only
        its own tokens (a chat's conversation so far, after something else used the model).
        The draft model and a head read them too. False if `should_stop` said so between two
        chunks (what was read stays read)."""
        self.prepare(tokens, len(tokens))
        self._prepared = None  # what `generate` would start from is no longer this
        sequence = torch.tensor(tokens, dtype=torch.long, device=self.target.device)
        for model in self._models_fed(drafting=True):
            if not self._feed(model, sequence, should_stop, leave_last_chunk=False):
                return False
        self._settle(sequence)
        return True

    def _will_look_up(self, ids: list[int]) -> bool:
        """Whether the drafter will copy this round's drafts by prompt lookup (a lookup-first
        drafter decides from the committed tokens alone, so k may depend on it losslessly)."""
        will_look_up = getattr(self.drafter, "will_look_up", None)
        return bool(will_look_up(ids)) if will_look_up is not None else False

    def _target_fed(self, start: int) -> None:
        """Tell a drafter that reads the target's features (engine/head_drafter.py) that the
        target just fed tokens from position `start`: they are its to read, no extra work."""
        target_fed = getattr(self.drafter, "target_fed", None)
        if target_fed is not None:
            target_fed(start)

    def _propose(self, sequence: torch.Tensor, ids: list[int], k: int, params: SamplingParams,
                 generator: torch.Generator | None,
                 should_stop: Callable[[], bool]) -> Proposal | None:
        if self.drafter is None or k == 0:
            return empty_proposal(sequence.device)
        proposal = self.drafter.propose(sequence, k, params, generator, should_stop, ids)
        if should_stop() and len(proposal) < k:
            self.drafter.rollback(sequence.shape[0])
            return None
        return proposal

    def _make_round(self, drafts: list[int], n: int, token: int | None, k: int,
                    draft_s: float, verify_s: float, fed: int = 0,
                    margins: Sequence[float] = (), by_lookup: bool = False) -> Round:
        """Split the drafts by the verdict; an EOS among them ends the answer there."""
        eos_at = next((i for i, t in enumerate(drafts) if t in self.eos_ids), None)
        if eos_at is not None:
            drafts = drafts[: eos_at + 1]
            if n > eos_at:  # the EOS itself was accepted: nothing follows it
                n, token = eos_at + 1, None
        accepted, rejected = tuple(drafts[:n]), tuple(drafts[n:])
        if not drafts:
            kind: TokenKind = "target"
        else:
            kind = "bonus" if not rejected else "resampled"
        committed = n + (0 if token is None else 1)
        return Round(accepted, rejected, token, kind, draft_s, verify_s, k, fed,
                     tuple(margins[:committed]), by_lookup)

    def _check(self, committed: int, event: Round) -> None:
        if not self.check_invariants:
            return
        expected = committed - 1
        if self.target.cache_length != expected:
            raise EngineInvariantError(
                f"target cache holds {self.target.cache_length} tokens, expected {expected}")
        model = getattr(self.drafter, "model", None)
        if model is None or self.drafter is None:
            return
        # a round that drafted leaves the draft at most `max_cache_lag` behind; one that
        # did not (k = 0) leaves it wherever it was, and its next proposal catches up
        lowest = expected - self.drafter.max_cache_lag if event.drafted else 0
        if not lowest <= model.cache_length <= expected:
            raise EngineInvariantError(
                f"draft cache holds {model.cache_length} tokens, expected {lowest}..{expected}")


    def _check_cancelled(self, committed: int) -> None:
        """After a cancelled round no cache may hold anything beyond the committed tokens."""
        if not self.check_invariants:
            return
        models = [self.target, getattr(self.drafter, "model", None)]
        for name, model in zip(("target", "draft"), models):
            if model is not None and model.cache_length > committed - 1:
                raise EngineInvariantError(f"{name} cache holds {model.cache_length} tokens after a "
                                           f"cancelled round, more than {committed - 1}")


def top_two_margins(logits: torch.Tensor) -> torch.Tensor:
    """Per row, the gap between the largest and the second-largest logit."""
    if logits.shape[-1] < 2:
        return torch.full(logits.shape[:1], float("inf"), device=logits.device)
    if numpy_friendly(logits):
        return _cpu_top_two_margins(logits)
    top = logits.float().topk(2, dim=-1).values
    return top[:, 0] - top[:, 1]


def _cpu_top_two_margins(logits: torch.Tensor) -> torch.Tensor:
    """`top_two_margins` of float32 rows on the CPU through their numpy view: the largest,
    then the largest of the rest (two reductions, no sort; several times faster than
    torch's topk on one row of a large vocabulary)."""
    margins = []
    for row in logits.numpy():
        best = row.argmax()
        rest = max(row[:best].max(initial=-float("inf")), row[best + 1:].max(initial=-float("inf")))
        margins.append(row[best] - rest)  # numpy float32 arithmetic, as topk's difference
    return torch.tensor(margins, dtype=torch.float32)


def committed_tensor(drafts: torch.Tensor, token: torch.Tensor, event: Round) -> torch.Tensor:
    """The round's committed tokens as a device tensor, cut from the round's own tensors (the
    accepted drafts, then the target's token; an accepted EOS ends them): a tensor made from
    the host's ids would be a copy that waits for the device, a second sync a round."""
    return torch.cat([drafts[:len(event.accepted)], token.reshape(1)])[:len(event.committed)]


def read_round(drafts: torch.Tensor, accepted: torch.Tensor, token: torch.Tensor,
               margins: torch.Tensor | None = None) -> tuple[list[int], int, int, list[float]]:
    """Drafts, accepted count, next token and the verify's top-two margins as Python
    values, in one device-to-host copy (float64 holds every token id exactly)."""
    k = drafts.numel()
    margins = drafts.new_zeros(0, dtype=torch.float64) if margins is None else margins
    values = torch.cat([drafts.reshape(-1).double(), accepted.reshape(1).double(),
                        token.reshape(1).double(), margins.reshape(-1).double()]).tolist()
    return ([int(v) for v in values[:k]], int(values[k]), int(values[k + 1]), values[k + 2:])
