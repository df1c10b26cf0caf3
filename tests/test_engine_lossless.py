"""Speculative decoding is lossless: greedy output equals plain greedy decoding token
for token, and sampled output follows the target's processed distribution. The
sampled cases run the real engine through the χ² harness of tests/lossless.py, and
the same harness must reject deliberately broken engines (the power check at the end):
a test that cannot fail for a lossy engine proves nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch

from specchat.engine import (Decoder, LookupFirstDrafter, ModelDrafter, NgramDrafter, Round,
                             SamplingParams, Settings)
from specchat.engine import verify as verify_module
from specchat.engine.adaptive import AdaptiveK
from specchat.engine.drafters import Proposal
from specchat.engine.verify import verify
from lossless import VOCAB, Harness, chi2_pvalue, exact_table, order_one, verdict  # noqa: F401 (test_distill)
from toy import FakeClock, TableModel, TimedTableModel, plain_greedy, use_fake_clock

PROMPTS = [[1, 2], [3, 1, 4, 1, 5], [7], [2, 2, 2, 2, 2, 2]]


def generated(decoder: Decoder, prompt, settings, n, generator=None) -> list[int]:
    out = []
    for event in decoder.generate(prompt, settings, n, generator):
        if isinstance(event, Round):
            out.extend(event.committed)
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculative_equals_plain_greedy(k, prompt):
    target, draft = TableModel(seed=0), TableModel(seed=1)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    assert generated(decoder, prompt, Settings(k=k), 40) == plain_greedy(TableModel(seed=0), prompt, 40)


def lookup_first(draft: TableModel, window: bool = False) -> LookupFirstDrafter:
    return LookupFirstDrafter(ModelDrafter(draft), NgramDrafter(max_ngram=2, min_ngram=1,
                                                                start_length=4, window=window))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_lookup_first_equals_plain_greedy_and_uses_both_drafters(prompt):
    drafter = lookup_first(TableModel(seed=1))
    sources = []
    original = drafter.propose

    def propose(*args, **kwargs):
        proposal = original(*args, **kwargs)
        sources.append(drafter.by_lookup)
        return proposal

    drafter.propose = propose
    decoder = Decoder(TableModel(seed=0), drafter, eos_ids=set())
    assert generated(decoder, prompt, Settings(k=4), 60) == plain_greedy(TableModel(seed=0), prompt, 60)
    assert True in sources and False in sources  # the lookup on copied text, the model elsewhere


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_ngram_equals_plain_greedy(prompt):
    decoder = Decoder(TableModel(seed=0), NgramDrafter(max_ngram=2, min_ngram=1), eos_ids=set())
    assert generated(decoder, prompt, Settings(k=4), 40) == plain_greedy(TableModel(seed=0), prompt, 40)


def test_k_zero_is_plain_decoding_with_target_kind():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    rounds = [e for e in decoder.generate([1, 2], Settings(k=0), 10) if isinstance(e, Round)]
    assert [e.token_kind for e in rounds] == ["target"] * 10
    assert all(e.drafted == 0 for e in rounds)
    assert [e.token for e in rounds] == plain_greedy(TableModel(seed=0), [1, 2], 10)


@pytest.mark.parametrize("k", [2, 4])
def test_self_draft_accepts_everything_and_tau_is_k_plus_one(k):
    target = TableModel(seed=3)
    draft = TableModel(seed=99).copy_tables_from(target)
    decoder = Decoder(target, ModelDrafter(draft), eos_ids=set())
    rounds = [e for e in decoder.generate([1, 2], Settings(k=k), (k + 1) * 6) if isinstance(e, Round)]
    assert all(not e.rejected and e.token_kind == "bonus" for e in rounds)
    assert sum(len(e.committed) for e in rounds) / len(rounds) == k + 1


def test_temperature_zero_is_deterministic():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    runs = {tuple(generated(decoder, [1, 2], Settings(k=3), 30, torch.Generator().manual_seed(s)))
            for s in range(3)}
    assert len(runs) == 1


def test_same_seed_gives_same_sampled_answer():
    decoder = Decoder(TableModel(seed=0), ModelDrafter(TableModel(seed=1)), eos_ids=set())
    settings = Settings(k=3, sampling=SamplingParams(temperature=1.0))
    first = generated(decoder, [1, 2], settings, 30, torch.Generator().manual_seed(7))
    second = generated(decoder, [1, 2], settings, 30, torch.Generator().manual_seed(7))
    assert first == second


# --- sampled answers through the χ² harness (tests/lossless.py) --------------------------

T1 = SamplingParams(temperature=1.0)
TOP_K = SamplingParams(temperature=1.0, top_k=2)
TOP_P = SamplingParams(temperature=1.5, top_p=0.8)
ROUNDS = 1000
AUTO_ROUNDS = 1200
"""k = "auto" drafts less (it often decodes plain), so it gets more rounds."""
PASS = 1e-3
"""A correct engine's verdict (Bonferroni p-value) stays above this."""
FAIL = 1e-8
"""A broken engine's verdict falls below this."""


pytestmark = pytest.mark.usefixtures("one_thread")


def make_target(model: TableModel | None = None) -> TableModel:
    return order_one(model or TableModel(VOCAB, seed=5, scale=1.0))


def near_draft(target: TableModel, model: TableModel | None = None) -> TableModel:
    """q near p (runs of accepts reach every draft position), but not equal, and
    depending on the last two tokens where the target depends on one."""
    draft = (model or TableModel(VOCAB, seed=7)).copy_tables_from(target)
    noise = torch.Generator().manual_seed(8)
    draft.t1 += 0.5 * torch.randn(draft.t1.shape, generator=noise)
    draft.t2 += 0.5 * torch.randn(draft.t2.shape, generator=noise)
    return draft


def far_draft(target: TableModel) -> TableModel:
    """q far from p: other random tables, twice as sharp."""
    return TableModel(VOCAB, seed=6, scale=2.0)


class ReducedVocabTable(TableModel):
    """A draft whose head covers tokens 0..2 only: logits -inf elsewhere, built by the
    same `scatter_logits` as models.reduced_vocab, so q = 0 for token 3."""

    ALLOWED = torch.tensor([0, 1, 2])

    def logits_after(self, history):
        from specchat.models.blocks.logits import scatter_logits

        full = super().logits_after(history)
        return scatter_logits(full[self.ALLOWED].unsqueeze(0), self.ALLOWED, VOCAB)[0]


def reduced_draft(target: TableModel) -> TableModel:
    return near_draft(target, ReducedVocabTable(VOCAB, seed=7))


@dataclass
class Case:
    drafter: Callable[[TableModel], object]
    params: SamplingParams
    k: int
    eos: frozenset = frozenset()
    seed: int = 1
    deepest_share: float = 0.5
    """The share of rounds that must draft the k-th position."""
    deepest_accepted: int = 20
    """Rounds that must accept the k-th draft (and so take the bonus path)."""


def model_drafter(make_draft):
    return lambda target: ModelDrafter(make_draft(target))


CASES = {
    "k=1, temperature 1": Case(model_drafter(near_draft), T1, 1),
    "k=2, temperature 1": Case(model_drafter(near_draft), T1, 2),
    "k=4, temperature 1": Case(model_drafter(near_draft), T1, 4),
    "k=4, top-k 2": Case(model_drafter(near_draft), TOP_K, 4),
    "k=4, temperature 1.5, top-p 0.8": Case(model_drafter(near_draft), TOP_P, 4),
    "k=4, a draft far from the target": Case(model_drafter(far_draft), T1, 4, deepest_accepted=0),
    "k=4, a reduced-vocabulary draft": Case(model_drafter(reduced_draft), T1, 4),
    "k=4, n-gram drafter": Case(lambda t: NgramDrafter(max_ngram=2, min_ngram=1, start_length=4),
                                T1, 4, deepest_share=0.1, deepest_accepted=0),
    "k=4, lookup first, the draft model elsewhere": Case(lambda t: lookup_first(near_draft(t)),
                                                         T1, 4, deepest_share=0.3),
}


def run_case(case: Case, drafter=None, rounds: int = ROUNDS, settings: Settings | None = None,
             target: TableModel | None = None, **harness_options):
    target = target or make_target()
    decoder = Decoder(target, drafter or case.drafter(target), set(case.eos))
    harness = Harness(decoder, settings or Settings(case.k, case.params), seed=case.seed,
                      **harness_options)
    table = exact_table(target, case.params)
    assert all(sum(p > 0 for p in row) >= 2 for row in table), "a degenerate case tests nothing"
    return harness, harness.run(rounds), table


@pytest.mark.parametrize("name", CASES)
def test_sampled_answers_follow_the_target_distribution_at_every_draft_position(name):
    case = CASES[name]
    _, sample, table = run_case(case)
    result = verdict(sample, table, set(case.eos))
    assert result.pvalue > PASS, f"{name}: {result}"
    drafted, accepted = sample.stats.position_drafted, sample.stats.position_accepted
    assert len(drafted) == case.k and drafted[-1] > case.deepest_share * sample.stats.rounds
    assert len(accepted) >= case.k * bool(case.deepest_accepted)
    assert accepted[case.k - 1:] >= [case.deepest_accepted] * bool(case.deepest_accepted)  # bonus path


def test_eos_under_sampling_ends_answers_at_the_eos_and_keeps_the_distribution():
    case = Case(model_drafter(near_draft), T1, 4, eos=frozenset({3}))
    _, sample, table = run_case(case)
    result = verdict(sample, table, {3})
    assert result.pvalue > PASS, str(result)
    assert sample.reasons["eos"] > 0.1 * sample.answers and sample.reasons["max_tokens"] > 0
    assert sample.eos_in_draft > 20  # an accepted EOS draft ended a round (nothing after it)


def test_stop_under_sampling_keeps_the_committed_tokens_distributed_as_the_target():
    """Answers stopped after 1..25 `should_stop` calls, many of them mid-draft."""
    case = Case(model_drafter(near_draft), T1, 4)
    _, sample, table = run_case(case, stop_after=lambda answer: 1 + answer % 25)
    result = verdict(sample, table, with_joint_firsts=False)
    assert result.pvalue > PASS, str(result)
    assert sample.reasons["stopped"] > 0.3 * sample.answers and sample.reasons["max_tokens"] > 0


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    return use_fake_clock(monkeypatch)


def auto_case(clock: FakeClock, policy_class=AdaptiveK):
    """k = "auto" on a fake clock where speculation only just pays: k moves with α."""
    target = make_target(TimedTableModel(clock, 1.0, 0.05, vocab_size=VOCAB, seed=5, scale=1.0))
    draft = near_draft(target, TimedTableModel(clock, 0.35, 0.001, vocab_size=VOCAB, seed=7))
    policy = policy_class(k_max=4)
    case = Case(lambda t: ModelDrafter(draft), T1, 4)
    return case, target, draft, policy


def test_auto_k_under_sampling_keeps_the_distribution(clock):
    case, target, draft, policy = auto_case(clock)
    _, sample, table = run_case(case, settings=Settings(4, T1, policy), target=target,
                                rounds=AUTO_ROUNDS)
    result = verdict(sample, table)
    assert result.pvalue > PASS, str(result)
    assert sample.ks[0] > 50 and sum(n for k, n in sample.ks.items() if k > 0) > 200  # k moved


# --- the power check: the same harness must reject broken engines ------------------------

class WrongPositionQ(ModelDrafter):
    """Reports each draft's q one position late (the previous draft's distribution)."""

    def propose(self, *args, **kwargs):
        proposal = super().propose(*args, **kwargs)
        return Proposal(proposal.tokens, proposal.probs.roll(1, dims=0))


class RawQ(ModelDrafter):
    """Samples from the processed q but reports the softmax of the raw logits."""

    def propose(self, sequence, *args, **kwargs):
        proposal = super().propose(sequence, *args, **kwargs)
        history = sequence.tolist()
        raw = [self.model.logits_after(history + proposal.tokens[:i].tolist())
               for i in range(len(proposal))]
        return Proposal(proposal.tokens, torch.stack(raw).softmax(-1))


class LookupTakenOnTrust(LookupFirstDrafter):
    """Proposes the lookup's tokens with a q that puts almost no mass on them (instead of as
    the deterministic tokens they are, q = None: accepted with probability p), so copied
    text is accepted whatever the target thinks of it: a mix-up of the two drafters' kinds
    of proposal."""

    def propose(self, sequence, k, params, generator, *args, **kwargs):
        proposal = super().propose(sequence, k, params, generator, *args, **kwargs)
        if not self.by_lookup or not len(proposal):
            return proposal
        q = torch.full((len(proposal), VOCAB), 1.0)
        q[torch.arange(len(proposal)), proposal.tokens] = 1e-6
        return Proposal(proposal.tokens, q / q.sum(-1, keepdim=True))


LOOKUP_ROUNDS = 4 * ROUNDS
"""Copied tokens are likely ones: taking them on trust shifts the distribution less than the
other mistakes do, and it takes more rounds to see (1,000 rounds gave p = 0.26)."""


@pytest.mark.parametrize("drafter_class, lossless", [(LookupFirstDrafter, True),
                                                     (LookupTakenOnTrust, False)])
def test_lookup_first_keeps_the_distribution_and_one_taking_copies_on_trust_fails(
        drafter_class, lossless):
    case = CASES["k=4, lookup first, the draft model elsewhere"]
    target = make_target()
    drafter = drafter_class(ModelDrafter(near_draft(target)), NgramDrafter(2, 1, 4, window=False))
    drafter.COPY_SPAN = 1  # the lookup proposes wherever it finds a match
    _, sample, table = run_case(case, drafter=drafter, target=target, rounds=LOOKUP_ROUNDS)
    pvalue = verdict(sample, table).pvalue
    assert pvalue > PASS if lossless else pvalue < FAIL, pvalue


class LenientTorch:
    """torch, but `rand` draws from [0, 1 / 1.5): accepts with min(1, 1.5 p / q)."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def rand(*args, **kwargs):
        return torch.rand(*args, **kwargs) / 1.5


def correction_from_p(p, q):
    """Resamples from p after a rejection instead of norm(max(0, p - q))."""
    return p


BROKEN = {
    "correction drawn from p instead of the residual": ("k=4, a draft far from the target", None,
                                                         "_correction_rows", correction_from_p),
    "q of the previous draft position": ("k=4, temperature 1", WrongPositionQ, None, None),
    "raw instead of processed q": ("k=4, top-k 2", RawQ, None, None),
    "an acceptance ratio 1.5 times too lenient": ("k=4, temperature 1", None, "torch", LenientTorch()),
}


@pytest.mark.parametrize("name", BROKEN)
def test_the_harness_rejects_a_broken_engine(name, monkeypatch):
    """Each variant runs the very case (same seed) that the correct engine passes above."""
    case_name, drafter_class, patched, value = BROKEN[name]
    case = CASES[case_name]
    target = make_target()
    drafter = None
    if drafter_class is not None:
        drafter = drafter_class(case.drafter(target).model)
    if patched is not None:
        monkeypatch.setattr(verify_module, patched, value)
    _, sample, table = run_case(case, drafter=drafter, target=target)
    result = verdict(sample, table)
    assert result.pvalue < FAIL, f"{name} was not caught: {result}"


class PeekingK(AdaptiveK):
    """A broken k = "auto": before the round it simulates the round on copies of the
    models from the generator's present state, and cuts k until the simulated round
    accepts every draft, so the real round (drawing the same numbers) never rejects."""

    harness: Harness
    target: TableModel
    draft: TableModel

    def __call__(self) -> int:
        k = super().__call__()
        while k and self.peek(k) < k:
            k -= 1
        return k

    def peek(self, k: int) -> int:
        """How many of k drafts the round would accept, the generator left untouched."""
        generator = self.harness.generator
        state = generator.get_state()
        sequence = torch.tensor(self.harness.sequence)
        copy = TableModel(VOCAB).copy_tables_from(self.draft)
        proposal = ModelDrafter(copy).propose(sequence, k, T1, generator)
        logits = TableModel(VOCAB).copy_tables_from(self.target).forward(
            torch.cat([sequence, proposal.tokens]), keep=len(proposal) + 1)
        accepted, _ = verify(proposal.tokens, proposal.probs, logits, T1, generator)
        generator.set_state(state)
        return int(accepted)


def test_the_harness_rejects_an_auto_k_that_peeks_at_the_current_round(clock):
    case, target, draft, policy = auto_case(clock, PeekingK)
    policy.target, policy.draft = target, draft
    decoder = Decoder(target, case.drafter(target), set())
    policy.harness = Harness(decoder, Settings(4, T1, policy), seed=case.seed)
    sample = policy.harness.run(AUTO_ROUNDS)
    result = verdict(sample, exact_table(target, T1))
    assert result.pvalue < FAIL, f"the peeking policy was not caught: {result}"
